/*-------------------------------------------------------------------------
 *
 * avro_input.h
 *	  The writer schemas of an Avro source's batches (avro_input.c).
 *
 *-------------------------------------------------------------------------
 */
#ifndef STREAMWIN_AVRO_INPUT_H
#define STREAMWIN_AVRO_INPUT_H

#include "decode.h"
#include "source.h"

typedef struct AvroSchemas AvroSchemas;

/*
 * avro_input_create
 *		Give decoder (of format avro, for source src) its schema: option
 *		"avro_schema"'s (a Debezium source's decoder has been told so
 *		already), or, for a source with option "schema_registry",
 *		the state that avro_input_prepare keeps between batches (returned;
 *		NULL for the former).  In CurrentMemoryContext, which lives as long
 *		as the decoder.  Inside a transaction.
 */
extern AvroSchemas *avro_input_create(SourceInfo *src, MessageDecoder *decoder);

/* A batch begins: what the last one learnt of the registry is forgotten. */
extern void avro_input_begin_batch(AvroSchemas *as);

/*
 * avro_input_prepare
 *		Before a batch's n rows are decoded: give the decoder the writer
 *		schema of every schema id in their Confluent headers (those of
 *		their payloads, or with keys those of their keys, for the decoder
 *		of an upsert source's keys) that it does not know, from streamwin.avro_schemas or else from the registry (and
 *		then kept there in the batch's transaction).  An id the registry
 *		does not have, or a negative one, which none gives, makes its
 *		messages dead letters for this batch.
 *		Raises an error (failing the batch) when the registry fails.
 */
extern void avro_input_prepare(AvroSchemas *as, MessageDecoder *decoder,
							   SourceRow *rows, int n, bool keys);

/*
 * avro_option_schema / avro_check_options
 *		Option "avro_schema" as JSON text (given as a string or as the
 *		schema itself), or NULL.  At a source's creation: the Avro options
 *		checked against format and the source's columns (desc, meta).
 */
extern char *avro_option_schema(Jsonb *options);
extern void avro_check_options(Jsonb *options, SourceFormat format, TupleDesc desc,
							   const SourceMetadata *meta, bool debezium);

#endif							/* STREAMWIN_AVRO_INPUT_H */
