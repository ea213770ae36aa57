/*-------------------------------------------------------------------------
 *
 * changelog_input.h
 *	  A Kafka message with an envelope as the rows of changes it makes
 *	  (changelog_input.c), for batch_input.c and create_kafka_source.
 *
 *-------------------------------------------------------------------------
 */
#ifndef STREAMWIN_CHANGELOG_INPUT_H
#define STREAMWIN_CHANGELOG_INPUT_H

#include "source.h"

/* What one message of a changelog makes. */
typedef struct ChangeRows
{
	char		kind;			/* Debezium's 'i'nsert, 'u'pdate, 'd'elete,
								 * 'T'runcate; an upsert's new 'v'ersion or
								 * 't'ombstone; 0: nothing (a Debezium
								 * tombstone) */
	int			nrows;			/* 0 to 2, the one retracted first */
	Datum	   *values[2];		/* of the source's columns, the change column
								 * set; the metadata columns are not */
	bool	   *nulls[2];
} ChangeRows;

typedef struct ChangeDecoder ChangeDecoder;

/*
 * changelog_decode_map
 *		source_metadata_map of a Kafka source with that envelope, the columns
 *		the envelope fills marked SOURCE_META_ENVELOPE too: a changelog's
 *		change column, an upsert source's key columns (key_columns, a List of
 *		String, each a column of desc); NULL if no column is marked.
 */
extern SourceMetadata *changelog_decode_map(const SourceInfo *src, TupleDesc desc,
											SourceEnvelope envelope, List *key_columns);

/*
 * change_decoder_create
 *		A decoder of the messages of changelog reader rd (its envelope not
 *		append), whose values `values` decodes (built over
 *		changelog_decode_map), in CurrentMemoryContext.  Inside a transaction.
 *		keyed: its rows are an upsert's, which the query's upsert operator
 *		turns into changes (true for an upsert source; for a Debezium source
 *		with key columns, when the query keeps its keys' rows): see
 *		changelog_input.c.
 */
extern ChangeDecoder *change_decoder_create(SourceReader *rd, MessageDecoder *values,
											bool keyed);

/*
 * change_decoder_keyed
 *		Are its rows an upsert's?  Then a row retracted (-1) is a key's
 *		deletion, of the key columns alone, and has no event time.
 */
extern bool change_decoder_keyed(ChangeDecoder *cd);

/*
 * change_decode
 *		The rows of message m into *out, in the decoder's buffers (valid until
 *		the next call); values passed by reference are made in
 *		CurrentMemoryContext.  Returns NULL, or why the message is a dead
 *		letter; the column types' input functions may raise errors, as
 *		decoder_decode says.
 */
extern const char *change_decode(ChangeDecoder *cd, const SourceRow *m, ChangeRows *out);

/*
 * change_decoder_avro_keys
 *		The decoder of an upsert source's Avro keys (a source of format avro
 *		with a schema registry), whose writer schemas the caller adds before
 *		a batch (avro_input_prepare), or NULL.
 */
extern MessageDecoder *change_decoder_avro_keys(ChangeDecoder *cd);

#endif							/* STREAMWIN_CHANGELOG_INPUT_H */
