/*-------------------------------------------------------------------------
 *
 * decode_text.h
 *	  Where the text values a decoder makes are allocated: carved from
 *	  blocks of the memory the decoder's user gives it, else a palloc each
 *	  (decode_text.c).
 *
 * A message's short strings (a key, an id) are most of the values a
 * decoder makes, and an AllocSet chunk's bookkeeping costs as much as a
 * short string's copy.  So while its user has given it memory for them
 * (decoder_set_value_memory, decode.h), a decoder carves its text values
 * from blocks of that memory, and they live exactly as long as it; none is
 * ever freed alone.  Private to src/decode*.c, below every other file of
 * it.
 *
 *-------------------------------------------------------------------------
 */
#ifndef STREAMWIN_DECODE_TEXT_H
#define STREAMWIN_DECODE_TEXT_H

/*
 * The rest of the current block of cxt; cxt NULL (and left 0): each value
 * a palloc of its own, in CurrentMemoryContext.
 */
typedef struct DecodeTextSpace
{
	MemoryContext cxt;
	char	   *next;
	Size		left;
} DecodeTextSpace;

extern void decode_text_space_set(DecodeTextSpace *space, MemoryContext cxt);
extern text *decode_text_alloc_block(DecodeTextSpace *space, int len);

/*
 * decode_text_alloc
 *		A text value of len bytes, its header set, its bytes the caller's to
 *		fill: carved from the space's block where it has room.
 */
static inline text *
decode_text_alloc(DecodeTextSpace *space, int len)
{
	Size		size = MAXALIGN(VARHDRSZ + len);
	text	   *t;

	if (likely(size <= space->left))
	{
		t = (text *) space->next;
		space->next += size;
		space->left -= size;
	}
	else
		t = decode_text_alloc_block(space, len);
	SET_VARSIZE(t, VARHDRSZ + len);
	return t;
}

/* A text value of the len bytes at chars, as textin makes it (no NUL among them) */
static inline Datum
decode_text_copy(DecodeTextSpace *space, const char *chars, int len)
{
	text	   *t = decode_text_alloc(space, len);

	memcpy(VARDATA(t), chars, len);
	return PointerGetDatum(t);
}

#endif							/* STREAMWIN_DECODE_TEXT_H */
