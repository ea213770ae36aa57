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
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/htup_details.h"
#include "access/xact.h"
#include "catalog/pg_type.h"
#include "executor/executor.h"
#include "mb/pg_wchar.h"
#include "nodes/readfuncs.h"
#include "utils/builtins.h"
#include "utils/memutils.h"
#include "utils/pg_lsn.h"
#include "utils/timestamp.h"
#include "utils/resowner.h"

#include "batch.h"
#include "source.h"
#include "window.h"

/*
 * batch_input_init
 *		Prepare decoding for a runner: decoder and event-time expression.
 *		Called once, in the runner's memory context.
 */
void
batch_input_init(QueryRunner *r)
{
	r->metadata = source_metadata_map(r->source, r->source_desc);
	/* a table source's rows arrive as tuples already (table_source.c) */
	if (r->source->kind == SOURCE_KAFKA)
	{
		r->decoder = decoder_create(r->source->format, r->source_desc, r->metadata);
		for (int i = 0; r->metadata != NULL && i < r->source_desc->natts; i++)
			if (r->metadata[i] == SOURCE_META_HEADERS)
				r->needs_headers = true;
	}
	r->slot = MakeSingleTupleTableSlot(r->source_desc, &TTSOpsVirtual);
	r->econtext = CreateStandaloneExprContext();
	if (r->query->event_time_expr != NULL)
	{
		Expr	   *expr = (Expr *) stringToNode(r->query->event_time_expr);

		/* Vars of the source are evaluated against the decoded row */
		r->event_time = ExecInitExpr(expr, NULL);
	}
}

/*
 * Fill the columns that hold the message's metadata (the source option
 * "metadata") rather than values of its payload.  Returns an error text
 * for a key or header that is not valid text in the database encoding (the
 * message is then a dead letter), else NULL.
 */
static const char *
fill_metadata(QueryRunner *r, KafkaMessage *m, Datum *values, bool *nulls)
{
	TupleDesc	desc = r->source_desc;

	for (int i = 0; i < desc->natts; i++)
	{
		Oid			type = TupleDescAttr(desc, i)->atttypid;

		if (r->metadata[i] == SOURCE_META_NONE)
			continue;			/* the decoder's */
		nulls[i] = false;
		switch (r->metadata[i])
		{
			case SOURCE_META_NONE:	/* not reached */
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
					const char *error;
					char	   *json = kafka_message_headers_json(m, &error);

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

/* Decode one message.  Throws on bad values; see the file header. */
static void
decode_one(QueryRunner *r, KafkaMessage *m, BatchMessageResult *res,
		   bool drop_late, TimestampTz watermark, MemoryContext batch_cxt)
{
	TupleTableSlot *slot = r->slot;
	MemoryContext msg_cxt = r->econtext->ecxt_per_tuple_memory;
	const char *err;

	ExecClearTuple(slot);
	MemoryContextSwitchTo(msg_cxt);
	if (r->decoder == NULL)
	{
		HeapTupleData tuple;

		tuple.t_data = (HeapTupleHeader) m->payload;
		tuple.t_len = m->len;
		ItemPointerSetInvalid(&tuple.t_self);
		tuple.t_tableOid = InvalidOid;
		/* only the event time and metadata columns need the columns here */
		if (r->event_time != NULL || r->metadata != NULL)
			heap_deform_tuple(&tuple, r->source_desc, slot->tts_values, slot->tts_isnull);
		err = r->metadata != NULL ? fill_metadata(r, m, slot->tts_values, slot->tts_isnull) : NULL;
	}
	else
	{
		err = decoder_decode(r->decoder, m->payload, m->len, slot->tts_values, slot->tts_isnull);
		if (err == NULL && r->metadata != NULL)
			err = fill_metadata(r, m, slot->tts_values, slot->tts_isnull);
	}
	if (err != NULL)
	{
		res->status = 'd';
		res->error = MemoryContextStrdup(batch_cxt, err);
		goto done;
	}
	ExecStoreVirtualTuple(slot);

	if (r->event_time != NULL)
	{
		bool		isnull;
		Datum		ts;

		r->econtext->ecxt_scantuple = slot;
		ts = ExecEvalExpr(r->event_time, r->econtext, &isnull);
		if (isnull)
		{
			res->status = 'd';
			res->error = "event time is NULL";
			goto done;
		}
		res->has_event_time = true;
		res->event_time = DatumGetTimestampTz(ts);
		if (TIMESTAMP_NOT_FINITE(res->event_time))
		{
			res->status = 'd';
			res->has_event_time = false;
			res->error = "event time must be finite";
			goto done;
		}
		if (r->query->windowed && !window_fits(res->event_time, r->query->window_size_us,
										   r->query->window_slide_us))
		{
			res->status = 'd';
			res->has_event_time = false;
			res->error = "event time is too close to the limits of the timestamp range for its window";
			goto done;
		}
		if (drop_late && res->event_time < watermark)
		{
			res->status = 'l';
			goto done;
		}
	}

	MemoryContextSwitchTo(batch_cxt);
	if (r->decoder == NULL && r->metadata == NULL)
	{
		/* the row is a tuple of the source's type already: no copy */
		res->tuple = palloc(HEAPTUPLESIZE);
		res->tuple->t_data = (HeapTupleHeader) m->payload;
		res->tuple->t_len = m->len;
		ItemPointerSetInvalid(&res->tuple->t_self);
		res->tuple->t_tableOid = InvalidOid;
	}
	else
		res->tuple = heap_form_tuple(r->source_desc, slot->tts_values, slot->tts_isnull);
	res->status = 'o';

done:
	MemoryContextSwitchTo(batch_cxt);
	ExecClearTuple(slot);
	ResetExprContext(r->econtext);
}

typedef struct DecodeRange
{
	QueryRunner *r;
	KafkaMessage *msgs;
	BatchMessageResult *res;
	int			lo;
	int			hi;
	bool		drop_late;
	TimestampTz watermark;
	MemoryContext batch_cxt;
} DecodeRange;

static void
decode_messages(void *arg)
{
	DecodeRange *d = arg;

	for (int i = d->lo; i < d->hi; i++)
	{
		memset(&d->res[i], 0, sizeof(BatchMessageResult));
		decode_one(d->r, &d->msgs[i], &d->res[i], d->drop_late, d->watermark, d->batch_cxt);
	}
}

/* Decode msgs[lo, hi) in one subtransaction; split the range on error. */
static void
decode_range(QueryRunner *r, KafkaMessage *msgs, BatchMessageResult *res, int lo, int hi,
			 bool drop_late, TimestampTz watermark)
{
	DecodeRange d = {r, msgs, res, lo, hi, drop_late, watermark, CurrentMemoryContext};
	ErrorData  *edata = run_in_subtransaction(decode_messages, &d);

	if (edata == NULL)
		return;
	ResetExprContext(r->econtext);
	if (ERRCODE_TO_CATEGORY(edata->sqlerrcode) != ERRCODE_DATA_EXCEPTION &&
		ERRCODE_TO_CATEGORY(edata->sqlerrcode) != ERRCODE_INTEGRITY_CONSTRAINT_VIOLATION)
		ReThrowError(edata);
	if (hi - lo == 1)
	{
		memset(&res[lo], 0, sizeof(BatchMessageResult));
		res[lo].status = 'd';
		/* the context names the JSON key or CSV field at fault */
		res[lo].error = edata->context ?
			psprintf("%s (%s)", edata->message, edata->context) : edata->message;
	}
	else
	{
		int			mid = lo + (hi - lo) / 2;

		decode_range(r, msgs, res, lo, mid, drop_late, watermark);
		decode_range(r, msgs, res, mid, hi, drop_late, watermark);
	}
}

/*
 * batch_input_decode
 *		Decode n messages; one result per message, allocated (with the
 *		tuples) in CurrentMemoryContext.  Rows with event time before the
 *		watermark are marked late when drop_late.  Must be called inside a
 *		transaction.
 */
BatchMessageResult *
batch_input_decode(QueryRunner *r, KafkaMessage *msgs, int n, bool drop_late,
				   TimestampTz watermark)
{
	BatchMessageResult *res = palloc0(sizeof(BatchMessageResult) * Max(n, 1));

	if (n > 0)
		decode_range(r, msgs, res, 0, n, drop_late, watermark);
	return res;
}
