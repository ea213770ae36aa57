/*-------------------------------------------------------------------------
 *
 * decode_bytes.h
 *	  Searching a message eight bytes at a time, for the formats' scanners
 *	  (decode_json.c, decode_csv.c) and the encoding check (decode.c).
 *
 * Most of a message's bytes are the text of its values, where the scanners
 * only look for the few bytes that end a value.  Testing a 64-bit word at
 * once does in a few instructions what a byte loop does in eight
 * iterations.  Per byte b of a word v, ((v - 0x01..) & ~v & 0x80..) flags
 * b == 0, and ((v - n..) & ~v & 0x80..) flags b < n (n <= 0x80).  The
 * lowest flag is always exact: a byte that does not test true borrows
 * nothing from the byte above it.  Higher flags may be false, so only the
 * lowest flag of a word, or of the OR of several such tests, is used.
 * Bytes 0x80 and up (those of multibyte characters) never test true.
 *
 * The words are read with memcpy (no alignment needed) and taken as
 * little-endian, the first byte in the lowest bits, so that the lowest
 * flag is the first byte.  DECODE_WORDWISE is not defined where that is
 * not so, and the callers then search byte by byte only.
 *
 *-------------------------------------------------------------------------
 */
#ifndef STREAMWIN_DECODE_BYTES_H
#define STREAMWIN_DECODE_BYTES_H

#include "port/pg_bitutils.h"

#ifndef WORDS_BIGENDIAN
#define DECODE_WORDWISE 1
#endif

/* every byte of a 64-bit word set to b */
#define BYTES8(b)	(UINT64CONST(0x0101010101010101) * (uint8) (b))

/* the eight bytes at p as a word */
static inline uint64
bytes_load8(const char *p)
{
	uint64		v;

	memcpy(&v, p, 8);
	return v;
}

/* flags of the bytes of v below n (n <= 0x80); the lowest is exact */
static inline uint64
bytes_below(uint64 v, uint8 n)
{
	return (v - BYTES8(n)) & ~v & BYTES8(0x80);
}

/* flags of the bytes of v equal to c; the lowest is exact */
static inline uint64
bytes_equal(uint64 v, char c)
{
	return bytes_below(v ^ BYTES8(c), 1);
}

/* the index of the byte of the lowest flag (flags != 0) */
static inline int
bytes_first(uint64 flags)
{
	return pg_rightmost_one_pos64(flags) / 8;
}

#endif							/* STREAMWIN_DECODE_BYTES_H */
