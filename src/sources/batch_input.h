/*-------------------------------------------------------------------------
 *
 * batch_input.h
 *	  A batch's rows as the source rows a query reads: decoded, with their
 *	  event time, late rows and dead letters set aside (batch_input.c).
 *
 *-------------------------------------------------------------------------
 */
#ifndef STREAMWIN_BATCH_INPUT_H
#define STREAMWIN_BATCH_INPUT_H

#include "executor/tuptable.h"
#include "nodes/execnodes.h"

#include "changelog_input.h"
#include "source.h"

/*
 * The parameter that stands for the batch's timestamp in the event-time
 * expression of a plan (event_time_for_plan in compile_shape.c).
 */
#define BATCH_TIME_PARAMID 1

/* How a query decodes the rows of its source; kept with its runner. */
typedef struct RowDecoder
{
	SourceReader *reader;
	QueryInfo  *query;
	MessageDecoder *decoder;	/* NULL when rows are tuples already */
	struct AvroSchemas *avro;	/* an Avro source's schemas by id, or NULL */
	MessageDecoder **key_avro;	/* per source column: its decoder of Avro
								 * keys (a key metadata column), or NULL */
	ChangeDecoder *changes;		/* a Kafka changelog's messages (two rows at
								 * most each), else NULL: one row each */
	SourceMetadata *metadata;	/* per source column, or NULL (decode.h) */
	ExprState  *event_time;		/* over a decoded row, or NULL */
	AttrNumber	change_attno;	/* a changelog's change column, or 0 */
	bool		late_by_window; /* a changelog's aggregation's rows are late
								 * when the last window of late_size_us and
								 * late_slide_us that holds them is closed */
	int64		late_size_us;	/* (0: not windowed, never late) */
	int64		late_slide_us;
	ExprContext *econtext;		/* its parameter: the batch's timestamp */
	TupleTableSlot *slot;
	/* the rest of the current block of rows of the batch (row_space) */
	char	   *rows_next;
	int			rows_left;
	/* of the decoder: messages of this batch without a column's key */
	int64	   *missing;
	int			nmissing;
	const char *const *missing_names;
} RowDecoder;

/*
 * What became of one row, or of one message of a Kafka changelog, which
 * may retract a row and add one (changelog_input.c): its event time is
 * the added row's, else the retracted row's, and it is late when the row
 * it adds is.
 */
typedef struct RowResult
{
	char		status;			/* 'o'k, 'l'ate, 'd'ead letter, 's'kipped (a
								 * changelog's message that changes nothing) */
	char		change;			/* a changelog's: what the message is
								 * (ChangeRows.kind) */
	bool		retraction;		/* a changelog's: a retraction was late
								 * (with 'o', one of the message's two) */
	bool		late_addition;	/* a changelog's 'o': the row it adds was
								 * late, its retraction kept */
	bool		has_event_time;
	TimestampTz event_time;
	TimestampTz late_time;		/* a changelog's: the event time of its row
								 * that was late */
	BatchRow	row;			/* 'o': the row, of the source's columns (a
								 * changelog's: the row added, or NULL) */
	BatchRow	retracted;		/* 'o', a changelog's: the row it retracts
								 * before, or NULL */
	const char *error;			/* 'd': why */
} RowResult;

/* A decoder for the reader's rows, in CurrentMemoryContext. */
extern RowDecoder *row_decoder_create(SourceReader *rd, QueryInfo *q);
extern void row_decoder_free(RowDecoder *d);

/*
 * rows_decode
 *		Decode n rows; one result each, allocated (with the tuples) in
 *		CurrentMemoryContext.  Rows whose event time is before the
 *		watermark are 'l'ate when drop_late.  A changelog's changes counted
 *		into the reader's changes, from zero (the upsert operator counts an
 *		upsert's).  Inside a transaction.
 */
extern RowResult *rows_decode(RowDecoder *d, SourceRow *rows, int n, bool drop_late,
							  TimestampTz watermark);

/*
 * rows_missing_keys_json
 *		After rows_decode: the number of messages whose JSON object lacked
 *		the key of a column, per such column, as the text of a JSON object
 *		({"orderid": 1000}) in CurrentMemoryContext; NULL when every message
 *		had every key (and for formats without keys).
 */
extern char *rows_missing_keys_json(RowDecoder *d);

/*
 * rows_record_rejected
 *		Keep the `count` rows of status 'd' (in streamwin.dead_letters) or
 *		'l' (in streamwin.late_rows, with the watermark they missed).
 */
extern void rows_record_rejected(RowDecoder *d, SourceRow *rows, RowResult *res, int n,
								 char status, int count, TimestampTz watermark);

#endif							/* STREAMWIN_BATCH_INPUT_H */
