/*-------------------------------------------------------------------------
 *
 * store_plan.c
 *	  What the compiler records of a state store in a query's plan, and
 *	  reading it back (see StorePlan in state_store.h).
 *
 * The plan is JSON under the plan's "store" and "dedup_store" members:
 * the number of keys, the window, and per partial how it merges.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "utils/builtins.h"
#include "utils/json.h"
#include "utils/jsonb.h"

#include "jsonb_util.h"
#include "state_store.h"

static const char *const merge_names[] = {
	[MERGE_ADD] = "add",
	[MERGE_SUM] = "sum",
	[MERGE_MIN] = "min",
	[MERGE_MAX] = "max",
	[MERGE_AND] = "and",
	[MERGE_OR] = "or",
	[MERGE_STATE] = "state",
	[MERGE_UNION] = "union",
	[MERGE_COUNTED] = "counted",
	[MERGE_FIRST] = "first",
	[MERGE_LAST] = "last",
};

const char *
merge_kind_name(MergeKind m)
{
	return merge_names[m];
}

void
store_plan_json(const StorePlan *plan, StringInfo buf)
{
	appendStringInfo(buf, "{\"keys\": %d, \"window_size_us\": " INT64_FORMAT ", ",
					 plan->nkeys, plan->windowed ? plan->window_size_us : (int64) 0);
	if (plan->session)
		appendStringInfoString(buf, "\"window\": \"session\", ");
	if (plan->dedup)
		appendStringInfoString(buf, "\"dedup\": true, ");
	if (plan->panes > 1)
		appendStringInfo(buf, "\"panes\": %d, \"slide_us\": " INT64_FORMAT ", ",
						 plan->panes, plan->slide_us);
	if (plan->rows_partial >= 0)
		appendStringInfo(buf, "\"rows_partial\": %d, ", plan->rows_partial);
	appendStringInfoString(buf, "\"partials\": [");
	for (int i = 0; i < plan->npartials; i++)
	{
		appendStringInfo(buf, "%s{\"merge\": \"%s\"", i ? ", " : "", merge_names[plan->merge[i]]);
		if (plan->aggregate[i] != NULL)
		{
			appendStringInfoString(buf, ", \"aggregate\": ");
			escape_json(buf, plan->aggregate[i]);
		}
		if (plan->collation != NULL && plan->collation[i] != NULL)
		{
			appendStringInfoString(buf, ", \"collation\": ");
			escape_json(buf, plan->collation[i]);
		}
		appendStringInfoChar(buf, '}');
	}
	appendStringInfoString(buf, "]}");
}

/*
 * The member of a plan that describes a store ("store", "dedup_store"), or
 * NULL: a plan compiled without that store.
 */
StorePlan *
store_plan_read(Jsonb *plan, const char *member)
{
	char	   *plan_json = jsonb_get_text(plan, member);
	Jsonb	   *store;
	JsonbIterator *it;
	JsonbValue	v;
	JsonbIteratorToken tok;
	StorePlan  *p;
	char	   *window;
	char	   *field;
	int			depth = 0;
	int			cap = 8;
	char	   *key = NULL;

	if (plan_json == NULL)
		return NULL;
	store = DatumGetJsonbP(DirectFunctionCall1(jsonb_in, CStringGetDatum(plan_json)));
	p = palloc0(sizeof(StorePlan));
	p->nkeys = atoi(jsonb_get_text(store, "keys"));
	window = jsonb_get_text(store, "window_size_us");
	p->window_size_us = window ? strtoll(window, NULL, 10) : 0;
	p->windowed = p->window_size_us > 0;
	window = jsonb_get_text(store, "window");
	p->session = window != NULL && strcmp(window, "session") == 0;
	p->dedup = jsonb_get_text(store, "dedup") != NULL;
	field = jsonb_get_text(store, "panes");
	p->panes = field ? atoi(field) : 0;
	field = jsonb_get_text(store, "slide_us");
	p->slide_us = field ? strtoll(field, NULL, 10) : 0;
	field = jsonb_get_text(store, "rows_partial");
	p->rows_partial = field ? atoi(field) : -1;
	p->merge = palloc(sizeof(MergeKind) * cap);
	p->aggregate = palloc0(sizeof(char *) * cap);
	p->collation = palloc0(sizeof(char *) * cap);

	/* partials: [{"merge": ..., "aggregate": ...}, ...] */
	it = JsonbIteratorInit(&store->root);
	while ((tok = JsonbIteratorNext(&it, &v, false)) != WJB_DONE)
	{
		if (tok == WJB_BEGIN_OBJECT)
		{
			if (++depth == 2)
			{
				if (p->npartials == cap)
				{
					cap *= 2;
					p->merge = repalloc(p->merge, sizeof(MergeKind) * cap);
					p->aggregate = repalloc(p->aggregate, sizeof(char *) * cap);
					p->collation = repalloc(p->collation, sizeof(char *) * cap);
				}
				p->merge[p->npartials] = MERGE_ADD;
				p->aggregate[p->npartials] = NULL;
				p->collation[p->npartials] = NULL;
				p->npartials++;
			}
		}
		else if (tok == WJB_END_OBJECT)
			depth--;
		else if (tok == WJB_KEY)
			key = pnstrdup(v.val.string.val, v.val.string.len);
		else if (tok == WJB_VALUE && depth == 2 && v.type == jbvString)
		{
			char	   *s = pnstrdup(v.val.string.val, v.val.string.len);

			if (strcmp(key, "merge") == 0)
			{
				bool		found = false;

				for (int m = 0; m < (int) lengthof(merge_names); m++)
					if (strcmp(s, merge_names[m]) == 0)
					{
						p->merge[p->npartials - 1] = (MergeKind) m;
						found = true;
					}
				if (!found)
					elog(ERROR, "streamwin: unknown merge kind \"%s\" in a query's plan", s);
			}
			else if (strcmp(key, "aggregate") == 0)
				p->aggregate[p->npartials - 1] = s;
			else if (strcmp(key, "collation") == 0)
				p->collation[p->npartials - 1] = s;
		}
	}
	return p;
}
