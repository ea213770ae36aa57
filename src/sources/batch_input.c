/*-------------------------------------------------------------------------
 *
 * batch_input.c
 *	  Turning a batch of messages into the source rows a query reads:
 *	  decode, compute the event time, set aside late rows and dead letters.
 *
 * Decoders report malformed messages without throwing, but type input
 * functions (int4in, timestamptz_in, ...) and the event-time expression
 * throw on bad values, and PostgreSQL 15 has no soft errors.  Catching such
 * an error safely needs a subtransaction.  One subtransaction per message
 * would cost more than the decoding itself, so the whole batch is decoded
 * in one; if it fails, the range is split in halves and each half retried,
 * down to the single message that is bad.  A batch with k bad messages
 * costs O(k log n) subtransactions, and a clean batch exactly one.
 *
 * Only data exceptions (SQLSTATE class 22) and constraint violations of
 * domains (class 23) mark a message as bad; anything else (out of memory,
 * query cancel) is re-thrown and fails the batch.
 *
 * An Avro source's writer schemas are looked up for the whole batch before
 * any message is decoded (avro_input.c): those of its values, of an upsert
 * source's keys and of key metadata columns.  So the schema registry is
 * asked at most once per schema id per batch, outside the subtransactions
 * below, and its failing fails the batch rather than making dead letters.
 *
 * A message of a Kafka changelog (envelope debezium or upsert) may retract
 * a row and add one: changelog_input.c makes its rows, each of which gets
 * the message's metadata columns and its own event time here.  Such a
 * message is late when the row it adds is, and one that changes nothing
 * (a tombstone after a Debezium delete) is skipped.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/htup_details.h"
#include "access/xact.h"
#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "executor/executor.h"
#include "mb/pg_wchar.h"
#include "nodes/params.h"
#include "nodes/readfuncs.h"
#include "storage/proc.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/json.h"
#include "utils/memutils.h"
#include "utils/pg_lsn.h"
#include "utils/timestamp.h"
#include "utils/resowner.h"

#include "avro_input.h"
#include "batch_input.h"
#include "catalog_access.h"
#include "catalog_log.h"
#include "join.h"
#include "spi_util.h"
#include "window.h"

/*
 * The decoders of the key metadata columns (but those of type bytea, which
 * hold the key's bytes) of a source of Avro keys: per column, each
 * message's key is its value.  NULL if there is none.
 */
static MessageDecoder **
key_decoders_create(TupleDesc desc, const SourceMetadata *meta)
{
	MessageDecoder **decoders = NULL;

	for (int i = 0; meta != NULL && i < desc->natts; i++)
	{
		TupleDesc	one;

		if (meta[i] != SOURCE_META_KEY || TupleDescAttr(desc, i)->atttypid == BYTEAOID)
			continue;
		if (decoders == NULL)
			decoders = palloc0(sizeof(MessageDecoder *) * desc->natts);
		one = CreateTemplateTupleDesc(1);
		TupleDescCopyEntry(one, 1, desc, i + 1);
		decoders[i] = decoder_create(SOURCE_FORMAT_AVRO, one, NULL);
		decoder_set_part(decoders[i], "key");
		decoder_avro_set_whole_value(decoders[i]);
	}
	return decoders;
}

RowDecoder *
row_decoder_create(SourceReader *rd, QueryInfo *q)
{
	RowDecoder *d = palloc0(sizeof(RowDecoder));

	d->reader = rd;
	d->query = q;
	if (rd->envelope == ENVELOPE_APPEND)
		d->metadata = source_metadata_map(rd->source, rd->desc);
	else
		d->metadata = changelog_decode_map(rd->source, rd->desc, rd->envelope,
										   rd->ops->key_columns(rd->source));
	/* a table source's rows arrive as tuples already (table_plugin.c) */
	if (!rd->rows_are_tuples)
	{
		d->decoder = decoder_create(source_format_from_name(rd->source->format), rd->desc,
									d->metadata);
		if (source_format_from_name(rd->source->format) == SOURCE_FORMAT_AVRO)
		{
			if (rd->envelope == ENVELOPE_DEBEZIUM)
				decoder_avro_set_debezium(d->decoder);
			d->avro = avro_input_create(rd->source, d->decoder);
			if (d->avro != NULL && source_keys_are_avro(rd->source))
				d->key_avro = key_decoders_create(rd->desc, d->metadata);
		}
		d->missing = decoder_missing_counts(d->decoder, &d->nmissing, &d->missing_names);
		/* a query that keeps its keys' rows reads the changes as upserts */
		if (rd->envelope != ENVELOPE_APPEND)
			d->changes = change_decoder_create(rd, d->decoder, q->upsert_store != NULL);
	}
	d->slot = MakeSingleTupleTableSlot(rd->desc, &TTSOpsVirtual);
	d->change_attno = source_change_attno(rd->desc);
	d->late_by_window = d->change_attno > 0 && q->aggregate;
	if (d->late_by_window && q->windowed && !q->session_windows)
	{
		d->late_size_us = q->window_size_us;
		d->late_slide_us = q->window_slide_us > 0 ? q->window_slide_us : q->window_size_us;
	}
	d->econtext = CreateStandaloneExprContext();
	d->econtext->ecxt_param_list_info = makeParamList(BATCH_TIME_PARAMID);
	if (rd->qsource->event_time_expr != NULL)
	{
		Expr	   *expr = (Expr *) stringToNode(rd->qsource->event_time_expr);

		/* Vars of the source are evaluated against the decoded row */
		d->event_time = ExecInitExpr(expr, NULL);
	}
	return d;
}

void
row_decoder_free(RowDecoder *d)
{
	if (d->econtext)
		FreeExprContext(d->econtext, false);
}

/*
 * Fill the columns that hold the message's metadata (the source option
 * "metadata") rather than values of its payload.  Returns an error text
 * for a key or header that is not valid text in the database encoding (the
 * message is then a dead letter), else NULL.
 */
static const char *
fill_metadata(RowDecoder *d, SourceRow *m, Datum *values, bool *nulls)
{
	TupleDesc	desc = d->reader->desc;

	for (int i = 0; i < desc->natts; i++)
	{
		Oid			type = TupleDescAttr(desc, i)->atttypid;

		if (d->metadata[i] == SOURCE_META_NONE || d->metadata[i] == SOURCE_META_ENVELOPE)
			continue;			/* the decoder's, the envelope's */
		nulls[i] = false;
		switch (d->metadata[i])
		{
			case SOURCE_META_NONE:	/* not reached */
			case SOURCE_META_ENVELOPE:
				break;
			case SOURCE_META_PARTITION:
				values[i] = type == INT8OID ? Int64GetDatum(m->partition) : Int32GetDatum(m->partition);
				break;
			case SOURCE_META_OFFSET:
				values[i] = type == LSNOID ?
					LSNGetDatum((XLogRecPtr) m->offset) : Int64GetDatum(m->offset);
				break;
			case SOURCE_META_TIMESTAMP:
				if (!m->has_timestamp)
					nulls[i] = true;
				else
					values[i] = TimestampTzGetDatum(m->timestamp);
				break;
			case SOURCE_META_KEY:
				if (m->key == NULL)
					nulls[i] = true;
				else if (d->key_avro != NULL && d->key_avro[i] != NULL)
				{
					const char *error = decoder_decode(d->key_avro[i], m->key, m->keylen,
													   &values[i], &nulls[i]);

					if (error != NULL)
						return psprintf("message key: %s", error);
				}
				else if (type == BYTEAOID)
				{
					bytea	   *b = palloc(VARHDRSZ + m->keylen);

					SET_VARSIZE(b, VARHDRSZ + m->keylen);
					memcpy(VARDATA(b), m->key, m->keylen);
					values[i] = PointerGetDatum(b);
				}
				else
				{
					if (!pg_verify_mbstr(GetDatabaseEncoding(), m->key, (int) m->keylen, true))
						return psprintf("message key is not valid %s", GetDatabaseEncodingName());
					values[i] = PointerGetDatum(cstring_to_text_with_len(m->key, (int) m->keylen));
				}
				break;
			case SOURCE_META_HEADERS:
				{
					const char *error = NULL;
					char	   *json;

					json = d->reader->ops->row_headers_json ?
						d->reader->ops->row_headers_json(d->reader, m, &error) : pstrdup("{}");
					if (json == NULL)
						return error;
					values[i] = type == JSONBOID ?
						DirectFunctionCall1(jsonb_in, CStringGetDatum(json)) :
						DirectFunctionCall1(json_in, CStringGetDatum(json));
				}
				break;
		}
	}
	return NULL;
}

/*
 * The event time of the row in d->slot into *ts: NULL, or why the row is a
 * dead letter.  Throws on bad values.
 */
static const char *
row_event_time(RowDecoder *d, TupleTableSlot *slot, TimestampTz *ts)
{
	QueryInfo  *q = d->query;
	MemoryContext old = MemoryContextSwitchTo(d->econtext->ecxt_per_tuple_memory);
	bool		isnull;
	Datum		value;

	d->econtext->ecxt_scantuple = slot;
	value = ExecEvalExpr(d->event_time, d->econtext, &isnull);
	MemoryContextSwitchTo(old);
	if (isnull)
		return "event time is NULL";
	*ts = DatumGetTimestampTz(value);
	if (TIMESTAMP_NOT_FINITE(*ts))
		return "event time must be finite";
	if (q->windowed && !window_fits(*ts, q->window_size_us, q->window_slide_us))
		return "event time is too close to the limits of the timestamp range for its window";
	if (q->join != NULL && !join_time_fits(q->join, *ts))
		return "event time is too close to the limits of the timestamp range for its join's time range";
	return NULL;
}

/*
 * Is a row of event time ts late, the watermark before the batch being
 * watermark?  A row of an append stream, or a change a transform passes
 * on, is when it is older than the watermark.  A row of a changelog that
 * an aggregation reads is when every window that holds it is
 * closed (the last of them ends at or before the watermark): a retraction
 * of a row added on time must reach the row's window for as long as it is
 * open, and an addition is judged the same way, so that a row and its
 * retraction are both applied or both dropped.  Without windows no
 * changelog row is late.  (A hop's window closed while a later one holding
 * the row is open: the store drops the row from that one alone,
 * store_closed_through.)
 */
static inline bool
row_is_late(RowDecoder *d, TimestampTz ts, TimestampTz watermark)
{
	if (!d->late_by_window)
		return ts < watermark;
	if (d->late_size_us == 0)
		return false;
	return window_floor(ts, d->late_slide_us) <= watermark - d->late_size_us;
}

/*
 * Space for the next row of the batch, natts values and their null flags
 * (a BatchRow), taken from blocks of rows in batch memory: one allocation
 * per block rather than one per message.  The row is the decoder's output
 * itself, so that nothing is copied into it.  row_taken() keeps it; a
 * message that gives no row leaves it for the next.  rows_decode starts
 * each batch with no block.
 */
#define ROW_BLOCK_BYTES		(64 * 1024)

static inline BatchRow
row_space(RowDecoder *d, int natts, MemoryContext batch_cxt)
{
	Size		size = MAXALIGN(natts * (sizeof(Datum) + sizeof(bool)));

	if (d->rows_left == 0)
	{
		int			nrows = Max(1, ROW_BLOCK_BYTES / size);

		d->rows_next = MemoryContextAlloc(batch_cxt, size * nrows);
		d->rows_left = nrows;
	}
	return (BatchRow) d->rows_next;
}

static inline void
row_taken(RowDecoder *d, int natts)
{
	d->rows_next += MAXALIGN(natts * (sizeof(Datum) + sizeof(bool)));
	d->rows_left--;
}

/*
 * Decode one message.  Throws on bad values; see the file header.
 *
 * The values are made in batch memory, where the row keeps them, rather
 * than in per-message memory and then copied out: the copy (as a tuple,
 * deformed again by every reader) was a large part of a row's way into the
 * plan.  The decoder writes them into the row's own space (row_space), and
 * the slot gets a copy only for the event time expression.  What input
 * functions leave behind stays in batch memory too until the batch ends;
 * the fast paths (decode_fast.h) leave nothing but the values.
 */
static void
decode_one(RowDecoder *d, SourceRow *m, RowResult *res,
		   bool drop_late, TimestampTz watermark, MemoryContext batch_cxt)
{
	TupleTableSlot *slot = d->slot;
	TupleDesc	desc = d->reader->desc;
	int			natts = desc->natts;
	BatchRow	row;
	Datum	   *values;
	bool	   *nulls;
	const char *err;

	MemoryContextSwitchTo(batch_cxt);
	row = row_space(d, natts, batch_cxt);
	values = row;
	nulls = BATCH_ROW_NULLS(row, natts);
	if (d->decoder == NULL)
	{
		/* a table source's row: its values point into the message */
		source_row_deform(desc, d->change_attno, m, values, nulls);
		err = d->metadata != NULL ? fill_metadata(d, m, values, nulls) : NULL;
	}
	else
	{
		err = decoder_decode(d->decoder, m->payload, m->len, values, nulls);
		if (err == NULL && d->metadata != NULL)
			err = fill_metadata(d, m, values, nulls);
	}
	if (err != NULL)
	{
		res->status = 'd';
		res->error = err;
		return;
	}

	if (d->event_time != NULL)
	{
		ExecClearTuple(slot);
		memcpy(slot->tts_values, values, sizeof(Datum) * natts);
		memcpy(slot->tts_isnull, nulls, sizeof(bool) * natts);
		ExecStoreVirtualTuple(slot);
		err = row_event_time(d, slot, &res->event_time);
		MemoryContextSwitchTo(batch_cxt);
		ExecClearTuple(slot);
		ResetExprContext(d->econtext);
		if (err != NULL)
		{
			res->status = 'd';
			res->error = err;
			return;
		}
		res->has_event_time = true;
		if (drop_late && row_is_late(d, res->event_time, watermark))
		{
			res->status = 'l';
			res->retraction = d->change_attno > 0 && !nulls[d->change_attno - 1] &&
				DatumGetInt16(values[d->change_attno - 1]) < 0;
			return;
		}
	}

	res->row = row;
	row_taken(d, natts);
	res->status = 'o';
}

/*
 * Decode one message of a Kafka changelog (d->changes): the rows it
 * retracts and adds, each with the message's metadata columns and, but for
 * an upsert's deletion, which has no values, its event time.  The message
 * is late when a row it adds is: a retraction is never late here (what it
 * retracts from decides).  Throws on bad values, as decode_one.
 */
static void
decode_change(RowDecoder *d, SourceRow *m, RowResult *res,
			  bool drop_late, TimestampTz watermark, MemoryContext batch_cxt)
{
	TupleTableSlot *slot = d->slot;
	int			natts = d->reader->desc->natts;
	AttrNumber	change = source_change_attno(d->reader->desc);
	ChangeRows	rows;
	bool		late = false;
	const char *err;

	MemoryContextSwitchTo(batch_cxt);
	err = change_decode(d->changes, m, &rows);
	res->change = rows.kind;
	for (int i = 0; err == NULL && i < rows.nrows; i++)
	{
		bool		adds = DatumGetInt16(rows.values[i][change - 1]) > 0;
		TimestampTz ts;

		if (d->metadata != NULL)
			err = fill_metadata(d, m, rows.values[i], rows.nulls[i]);
		/* a key's deletion (keyed) has no values to judge */
		if (err == NULL && d->event_time != NULL && (adds || !change_decoder_keyed(d->changes)))
		{
			ExecClearTuple(slot);
			memcpy(slot->tts_values, rows.values[i], sizeof(Datum) * natts);
			memcpy(slot->tts_isnull, rows.nulls[i], sizeof(bool) * natts);
			ExecStoreVirtualTuple(slot);
			err = row_event_time(d, slot, &ts);
			if (err == NULL && (adds || !res->has_event_time))
			{
				res->has_event_time = true;
				res->event_time = ts;
			}
			/* a late row of the two goes, the other stays (row_is_late) */
			if (err == NULL && drop_late && row_is_late(d, ts, watermark))
			{
				if (adds)
					late = true;
				else
					res->retraction = true;
				res->late_time = ts;
				continue;
			}
		}
		if (err == NULL && adds)
			res->row = batch_row_make(natts, rows.values[i], rows.nulls[i]);
		else if (err == NULL)
			res->retracted = batch_row_make(natts, rows.values[i], rows.nulls[i]);
	}
	if (err != NULL)
	{
		res->status = 'd';
		res->error = err;
		res->has_event_time = false;
		res->row = res->retracted = NULL;
	}
	else if (rows.nrows == 0)
		res->status = 's';
	else
	{
		res->status = res->row == NULL && res->retracted == NULL && (late || res->retraction) ? 'l' : 'o';
		res->late_addition = res->status == 'o' && late;
	}
	MemoryContextSwitchTo(batch_cxt);
	ExecClearTuple(slot);
	ResetExprContext(d->econtext);
}

typedef struct DecodeRange
{
	RowDecoder *d;
	SourceRow  *msgs;
	RowResult  *res;
	int			lo;
	int			hi;
	bool		drop_late;
	TimestampTz watermark;
	MemoryContext batch_cxt;
} DecodeRange;

/*
 * How many messages ahead decode_messages asks for a payload's first and
 * last bytes (most payloads span one or two cache lines): the payloads lie
 * wherever librdkafka's fetches put them, and a few messages take about as
 * long to decode as a miss takes to be served.
 */
#define DECODE_PREFETCH_DISTANCE 4

static void
decode_messages(void *arg)
{
	DecodeRange *dr = arg;

	for (int i = dr->lo; i < dr->hi; i++)
	{
		if (i + DECODE_PREFETCH_DISTANCE < dr->hi &&
			dr->msgs[i + DECODE_PREFETCH_DISTANCE].len > 0 &&
			dr->msgs[i + DECODE_PREFETCH_DISTANCE].payload != NULL)
		{
			const SourceRow *ahead = &dr->msgs[i + DECODE_PREFETCH_DISTANCE];

			__builtin_prefetch(ahead->payload);
			__builtin_prefetch(ahead->payload + ahead->len - 1);
		}
		memset(&dr->res[i], 0, sizeof(RowResult));
		if (dr->d->changes != NULL)
			decode_change(dr->d, &dr->msgs[i], &dr->res[i], dr->drop_late, dr->watermark,
						  dr->batch_cxt);
		else
			decode_one(dr->d, &dr->msgs[i], &dr->res[i], dr->drop_late, dr->watermark,
					   dr->batch_cxt);
	}
}

/*
 * Can an error of a type's input function (or a domain's check) be the
 * message's own: its value refused?  Data exceptions and constraint
 * violations, as most input functions raise; program limits (an array of
 * seven dimensions, a JSON text nested past the stack); syntax errors and
 * unknown names (hstore, tsquery, regclass) but a privilege refused, and
 * features a value asks for that its type does not have (a regclass of
 * another database, a JSON escape the database encoding cannot convert),
 * those three kinds only from the type's own input function, not from a
 * function of the user's.  Anything else is the environment's (memory,
 * cancel, I/O, an internal error), and would refuse every message alike:
 * the batch fails, and its retry reads them again, rather than make each
 * one a dead letter.
 */
static bool
message_error(ErrorData *edata)
{
	int			category = ERRCODE_TO_CATEGORY(edata->sqlerrcode);

	if (category == ERRCODE_DATA_EXCEPTION || category == ERRCODE_INTEGRITY_CONSTRAINT_VIOLATION)
		return true;
	if (category != ERRCODE_PROGRAM_LIMIT_EXCEEDED &&
		category != ERRCODE_FEATURE_NOT_SUPPORTED &&
		(category != ERRCODE_SYNTAX_ERROR_OR_ACCESS_RULE_VIOLATION ||
		 edata->sqlerrcode == ERRCODE_INSUFFICIENT_PRIVILEGE))
		return false;

	/*
	 * Raised in a function of SQL or PL/pgSQL (a domain's CHECK, an event
	 * time calling one): a table it reads dropped, its own recursion, the
	 * same for every message.
	 */
	return edata->context == NULL ||
		(strstr(edata->context, "SQL function") == NULL &&
		 strstr(edata->context, "PL/pgSQL function") == NULL &&
		 strstr(edata->context, "SQL statement") == NULL);
}

/*
 * Decode msgs[lo, hi) in one subtransaction; split the range on error.  The
 * missing keys counted by a failed attempt are taken back: its messages are
 * decoded again.
 */
static void
decode_range(RowDecoder *d, SourceRow *msgs, RowResult *res, int lo, int hi,
			 bool drop_late, TimestampTz watermark)
{
	DecodeRange dr = {d, msgs, res, lo, hi, drop_late, watermark, CurrentMemoryContext};
	int64	   *missing_before = NULL;
	ErrorData  *edata;

	if (d->nmissing > 0)
	{
		missing_before = palloc(sizeof(int64) * d->nmissing);
		memcpy(missing_before, d->missing, sizeof(int64) * d->nmissing);
	}
	edata = run_in_subtransaction(decode_messages, &dr);
	if (edata == NULL)
		return;
	if (missing_before != NULL)
		memcpy(d->missing, missing_before, sizeof(int64) * d->nmissing);
	ResetExprContext(d->econtext);
	if (!message_error(edata))
		ReThrowError(edata);
	if (hi - lo == 1)
	{
		memset(&res[lo], 0, sizeof(RowResult));
		res[lo].status = 'd';
		/* the context names the JSON key or CSV field at fault */
		res[lo].error = edata->context ?
			psprintf("%s (%s)", edata->message, edata->context) : edata->message;
	}
	else
	{
		int			mid = lo + (hi - lo) / 2;

		decode_range(d, msgs, res, lo, mid, drop_late, watermark);
		decode_range(d, msgs, res, mid, hi, drop_late, watermark);
	}
}

/*
 * decode_range over all n messages, the texts of their values carved from
 * blocks of the batch's memory, where their rows are (row_space), rather
 * than a palloc each; the decoder gives that memory back before anything
 * else can decode with it, whatever happens here.
 */
static pg_noinline void
decode_in_value_memory(RowDecoder *d, SourceRow *rows, RowResult *res, int n,
					   bool drop_late, TimestampTz watermark)
{
	decoder_set_value_memory(d->decoder, CurrentMemoryContext);
	PG_TRY();
	{
		decode_range(d, rows, res, 0, n, drop_late, watermark);
	}
	PG_FINALLY();
	{
		decoder_set_value_memory(d->decoder, NULL);
	}
	PG_END_TRY();
}

/* The inserts, updates and deletes of a Debezium batch's messages kept. */
static void
count_changes(SourceChanges *changes, const RowResult *res, int n)
{
	for (int i = 0; i < n; i++)
	{
		if (res[i].status != 'o')
			continue;
		if (res[i].change == 'i')
			changes->inserts++;
		else if (res[i].change == 'u')
			changes->updates++;
		else if (res[i].change == 'd')
			changes->deletes++;
	}
}

RowResult *
rows_decode(RowDecoder *d, SourceRow *rows, int n, bool drop_late, TimestampTz watermark)
{
	/* decode_messages clears each entry as it decodes its message */
	RowResult  *res = palloc(sizeof(RowResult) * Max(n, 1));
	ParamExternData *batch_time_param;

	batch_time_param =
		&d->econtext->ecxt_param_list_info->params[BATCH_TIME_PARAMID - 1];
	/* the event time sees the batch's timestamp as the statements do */
	batch_time_param->ptype = TIMESTAMPTZOID;
	batch_time_param->pflags = PARAM_FLAG_CONST;
	batch_time_param->isnull = false;
	batch_time_param->value = TimestampTzGetDatum(batch_scope_timestamp());
	if (d->nmissing > 0)
		memset(d->missing, 0, sizeof(int64) * d->nmissing);
	/* the last batch's blocks of rows went with its memory */
	d->rows_left = 0;
	/* the writer schemas first: the registry is asked outside the decoding */
	if (d->avro != NULL && n > 0)
	{
		avro_input_begin_batch(d->avro);
		avro_input_prepare(d->avro, d->decoder, rows, n, false);
		if (d->changes != NULL && change_decoder_avro_keys(d->changes) != NULL)
			avro_input_prepare(d->avro, change_decoder_avro_keys(d->changes), rows, n, true);
		for (int i = 0; d->key_avro != NULL && i < d->reader->desc->natts; i++)
			if (d->key_avro[i] != NULL)
				avro_input_prepare(d->avro, d->key_avro[i], rows, n, true);
	}
	if (n > 0 && d->decoder != NULL)
		decode_in_value_memory(d, rows, res, n, drop_late, watermark);
	else if (n > 0)
		decode_range(d, rows, res, 0, n, drop_late, watermark);
	memset(&d->reader->changes, 0, sizeof(SourceChanges));
	/* (the upsert operator counts a keyed decoder's) */
	if (d->reader->envelope == ENVELOPE_DEBEZIUM && !change_decoder_keyed(d->changes))
		count_changes(&d->reader->changes, res, n);
	return res;
}

char *
rows_missing_keys_json(RowDecoder *d)
{
	StringInfoData buf;
	bool		any = false;

	initStringInfo(&buf);
	appendStringInfoChar(&buf, '{');
	for (int i = 0; i < d->nmissing; i++)
	{
		if (d->missing[i] == 0)
			continue;
		if (any)
			appendStringInfoString(&buf, ", ");
		escape_json(&buf, d->missing_names[i]);
		appendStringInfo(&buf, ": " INT64_FORMAT, d->missing[i]);
		any = true;
	}
	appendStringInfoChar(&buf, '}');
	if (!any)
	{
		pfree(buf.data);
		return NULL;
	}
	return buf.data;
}

/* qsort_arg comparator: row indexes by (partition, offset) */
static int
compare_positions(const void *a, const void *b, void *arg)
{
	const SourceRow *rows = arg;
	const SourceRow *x = &rows[*(const int *) a];
	const SourceRow *y = &rows[*(const int *) b];

	if (x->partition != y->partition)
		return x->partition < y->partition ? -1 : 1;
	if (x->offset != y->offset)
		return x->offset < y->offset ? -1 : 1;
	return 0;
}

/*
 * The rows set aside with status 'd' (dead letters: position, payload,
 * error) or 'l' (late rows: position, payload, event time and the
 * watermark they missed) go in with one statement.
 *
 * They go in by (partition, offset).  Dead letters are shared by every
 * query of the source, so two queries' batches may insert the same keys at
 * once; each batch meets the partitions interleaved in its own fetch order,
 * and inserting in that order let two batches each wait for a key the other
 * had taken first (a deadlock, then a retried batch).  One order for all
 * makes the later batch simply wait for the earlier one.
 */
void
rows_record_rejected(RowDecoder *d, SourceRow *rows, RowResult *res, int n,
					 char status, int count, TimestampTz watermark)
{
	SourceReader *rd = d->reader;
	int		   *order = palloc(sizeof(int) * count);
	int			norder = 0;
	Datum	   *parts = palloc(sizeof(Datum) * count);
	Datum	   *offs = palloc(sizeof(Datum) * count);
	Datum	   *payloads = palloc(sizeof(Datum) * count);
	Datum	   *details = palloc(sizeof(Datum) * count);

	for (int i = 0; i < n && norder < count; i++)
	{
		/* a message of two rows of which one alone was late: captured too */
		bool		partly_late = status == 'l' && res[i].status == 'o' &&
			(res[i].retraction || res[i].late_addition);

		if (res[i].status == status || partly_late)
			order[norder++] = i;
	}
	qsort_arg(order, norder, sizeof(int), compare_positions, rows);

	for (int j = 0; j < norder; j++)
	{
		int			i = order[j];

		parts[j] = Int32GetDatum(rows[i].partition);
		offs[j] = Int64GetDatum(rows[i].offset);
		payloads[j] = PointerGetDatum(rd->ops->row_text(rd, &rows[i]));
		/* (a message partly late: the time of its late row) */
		details[j] = status == 'd' ? CStringGetTextDatum(res[i].error) :
			TimestampTzGetDatum(res[i].status == 'o' ? res[i].late_time : res[i].event_time);
	}
	catalog_log_rejected(status, d->query->name, rd->source->name,
						 PointerGetDatum(construct_array(parts, norder, INT4OID, 4, true, TYPALIGN_INT)),
						 PointerGetDatum(construct_array(offs, norder, INT8OID, 8, FLOAT8PASSBYVAL,
														 TYPALIGN_DOUBLE)),
						 PointerGetDatum(construct_array(payloads, norder, BYTEAOID, -1, false,
														 TYPALIGN_INT)),
						 status == 'd' ?
						 PointerGetDatum(construct_array(details, norder, TEXTOID, -1, false,
														 TYPALIGN_INT)) :
						 PointerGetDatum(construct_array(details, norder, TIMESTAMPTZOID, 8,
														 FLOAT8PASSBYVAL, TYPALIGN_DOUBLE)),
						 watermark);
}
