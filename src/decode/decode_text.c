/*-------------------------------------------------------------------------
 *
 * decode_text.c
 *	  The blocks a decoder's text values are carved from (decode_text.h).
 *
 * src/decode/decode_text.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "decode_text.h"

/*
 * A block: big enough that a block's palloc is rare, small enough that the
 * unused end of the last one wastes little.  A value of more than an
 * eighth of one gets a palloc of its own.
 */
#define DECODE_TEXT_BLOCK	(64 * 1024)

/*
 * decode_text_space_set
 *		Carve from blocks of cxt from now on (NULL: palloc each value), the
 *		rest of the current block forgotten.
 */
void
decode_text_space_set(DecodeTextSpace *space, MemoryContext cxt)
{
	space->cxt = cxt;
	space->next = NULL;
	space->left = 0;
}

/*
 * decode_text_alloc_block
 *		decode_text_alloc's way when the block has no room for a value of
 *		len bytes: a new block, or a palloc of the value alone (in
 *		CurrentMemoryContext, where the decoder's other values go) when it
 *		is big or no memory was given; of its exact size, which a value of
 *		up to MaxAllocSize may need.
 */
text *
decode_text_alloc_block(DecodeTextSpace *space, int len)
{
	Size		size = MAXALIGN(VARHDRSZ + len);
	char	   *block;

	if (space->cxt == NULL || size > DECODE_TEXT_BLOCK / 8)
		return (text *) palloc(VARHDRSZ + len);
	block = MemoryContextAlloc(space->cxt, DECODE_TEXT_BLOCK);
	space->next = block + size;
	space->left = DECODE_TEXT_BLOCK - size;
	return (text *) block;
}
