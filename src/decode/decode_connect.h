/*-------------------------------------------------------------------------
 *
 * decode_connect.h
 *	  The logical types a Kafka Connect schema gives the fields of a
 *	  Debezium event's row images (decode_connect.c), for decode.c.
 *
 *-------------------------------------------------------------------------
 */
#ifndef STREAMWIN_DECODE_CONNECT_H
#define STREAMWIN_DECODE_CONNECT_H

#include "decode_logical.h"
#include "decode_value.h"

/* What the last schema gave each image, kept while messages bring the same */
typedef struct ConnectSchema
{
	MemoryContext cxt;			/* holds what follows; reset for a new schema */
	char	   *text;			/* the schema's JSON text */
	int			len;
	LogicalField *row;			/* per column of the state, or NULL: none; */
	LogicalField *before;		/* for the fields of the struct, and of its */
	LogicalField *after;		/* "before" and "after" (a Debezium event) */
} ConnectSchema;

extern ConnectSchema *connect_schema_create(MemoryContext parent);
extern void connect_schema_read(DecodeState *state, ConnectSchema *cache, const DecodeSpan *schema);

#endif							/* STREAMWIN_DECODE_CONNECT_H */
