/*-------------------------------------------------------------------------
 *
 * join_plan.c
 *	  A stream-stream join's plan (join.h): written by the compiler into the
 *	  query's plan, read back with the catalog, and the times it implies.
 *
 * Apart from op_join.c, which runs a join's batches: reading a query from the
 * catalog needs its plan, and nothing of a batch.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "common/int.h"

#include "utils/builtins.h"
#include "utils/json.h"
#include "utils/jsonb.h"
#include "utils/timestamp.h"

#include "join.h"
#include "jsonb_util.h"

/* A string member's value, or null (a join without a range has no event times) */
static void
json_string_or_null(StringInfo buf, const char *s)
{
	if (s == NULL)
		appendStringInfoString(buf, "null");
	else
		escape_json(buf, s);
}

void
join_plan_json(const JoinPlan *jp, StringInfo plan)
{
	appendStringInfo(plan, ", \"join\": {\"hold_us\": " INT64_FORMAT, jp->hold_us);
	if (jp->nkeys > 0)
	{
		StringInfoData keys;

		/* attno0:attno1:op:collation:left, one key after the other */
		initStringInfo(&keys);
		for (int k = 0; k < jp->nkeys; k++)
			appendStringInfo(&keys, "%s%d:%d:%u:%u:%d", k ? ";" : "",
							 jp->keys[k].attno[0], jp->keys[k].attno[1], jp->keys[k].op,
							 jp->keys[k].collation, jp->keys[k].left);
		appendStringInfoString(plan, ", \"store_keys\": ");
		escape_json(plan, keys.data);
		if (jp->pairs)
			appendStringInfoString(plan, ", \"pairs\": true");
	}
	for (int s = 0; s < QUERY_MAX_SOURCES; s++)
	{
		const JoinSidePlan *side = &jp->sides[s];

		appendStringInfo(plan, ", \"event_time_%d\": ", s);
		json_string_or_null(plan, side->event_time_expr);
		if (side->evicted)
			appendStringInfo(plan, ", \"evict_after_us_%d\": " INT64_FORMAT, s, side->evict_after_us);
		if (side->preserved)
			appendStringInfo(plan, ", \"preserved_%d\": true", s);
		appendStringInfo(plan, ", \"time_column_%d\": ", s);
		json_string_or_null(plan, side->time_column);
		if (side->batch_column != NULL)
		{
			appendStringInfo(plan, ", \"batch_column_%d\": ", s);
			escape_json(plan, side->batch_column);
		}
		if (side->row_column != NULL)
		{
			appendStringInfo(plan, ", \"row_column_%d\": ", s);
			escape_json(plan, side->row_column);
			appendStringInfo(plan, ", \"matched_batch_column_%d\": ", s);
			escape_json(plan, side->matched_batch_column);
		}
	}
	appendStringInfoChar(plan, '}');
}

JoinPlan *
join_plan_read(Jsonb *plan)
{
	char	   *plan_json = jsonb_get_text(plan, "join");
	Jsonb	   *join;
	JoinPlan   *jp;
	char	   *keys;
	char	   *pairs;

	if (plan_json == NULL)
		return NULL;
	join = DatumGetJsonbP(DirectFunctionCall1(jsonb_in, CStringGetDatum(plan_json)));
	jp = palloc0(sizeof(JoinPlan));
	jp->hold_us = strtoll(jsonb_get_text(join, "hold_us"), NULL, 10);
	keys = jsonb_get_text(join, "store_keys");
	for (char *k = keys; k != NULL && *k != '\0' && jp->nkeys < JOIN_MAX_KEYS;)
	{
		JoinKeyPlan *key = &jp->keys[jp->nkeys++];
		int			a0;
		int			a1;
		int			used = 0;

		if (sscanf(k, "%d:%d:%u:%u:%d%n", &a0, &a1, &key->op, &key->collation, &key->left,
				   &used) != 5 || used == 0)
			elog(ERROR, "streamwin: invalid join store keys in a query's plan: \"%s\"", keys);
		key->attno[0] = (AttrNumber) a0;
		key->attno[1] = (AttrNumber) a1;
		k += used;
		if (*k == ';')
			k++;
	}
	pairs = jsonb_get_text(join, "pairs");
	jp->pairs = jp->nkeys > 0 && pairs != NULL && strcmp(pairs, "true") == 0;
	for (int s = 0; s < QUERY_MAX_SOURCES; s++)
	{
		JoinSidePlan *side = &jp->sides[s];
		char	   *after = jsonb_get_text(join, psprintf("evict_after_us_%d", s));
		char	   *preserved = jsonb_get_text(join, psprintf("preserved_%d", s));

		side->event_time_expr = jsonb_get_text(join, psprintf("event_time_%d", s));
		side->evicted = after != NULL;
		side->evict_after_us = after ? strtoll(after, NULL, 10) : 0;
		side->preserved = preserved != NULL && strcmp(preserved, "true") == 0;
		side->time_column = jsonb_get_text(join, psprintf("time_column_%d", s));
		side->batch_column = jsonb_get_text(join, psprintf("batch_column_%d", s));
		side->row_column = jsonb_get_text(join, psprintf("row_column_%d", s));
		side->matched_batch_column = jsonb_get_text(join, psprintf("matched_batch_column_%d", s));
	}
	return jp;
}

bool
join_side_cutoff(const JoinSidePlan *side, TimestampTz wm, TimestampTz *cutoff)
{
	if (!side->evicted)
		return false;
	/* out of reach: event time + evict_after_us < wm */
	if (side->evict_after_us > 0 && wm < DT_NOBEGIN + side->evict_after_us)
		return false;
	if (side->evict_after_us < 0 && wm > DT_NOEND + side->evict_after_us)
		return false;
	*cutoff = wm - side->evict_after_us;
	return true;
}

TimestampTz
join_held_watermark(const JoinPlan *jp, TimestampTz watermark)
{
	if (watermark < DT_NOBEGIN + jp->hold_us)
		return DT_NOBEGIN;
	return watermark - jp->hold_us;
}

/*
 * The join's condition and its statements shift a row's event time by the
 * range's bounds (i.imp_time + interval '10 minutes'), which fails past
 * the timestamp range: every batch would fail on such a row, at every
 * retry.  A row within that reach of either limit of the range (the
 * bounds, and a month's slack for the days and months an interval in the
 * condition may have) is a dead letter instead, as one too close to the
 * limits for its window is.
 */
bool
join_time_fits(const JoinPlan *jp, TimestampTz ts)
{
	int64		reach = 31 * USECS_PER_DAY;

	for (int s = 0; s < QUERY_MAX_SOURCES; s++)
	{
		int64		after = jp->sides[s].evict_after_us;

		if (after == PG_INT64_MIN || pg_add_s64_overflow(reach, after < 0 ? -after : after, &reach))
			return false;
	}
	return ts >= MIN_TIMESTAMP + reach && ts < END_TIMESTAMP - reach;
}
