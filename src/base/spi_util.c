/*-------------------------------------------------------------------------
 *
 * spi_util.c
 *	  Small helpers every part of streamwin uses (see spi_util.h).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/htup_details.h"
#include "access/xact.h"
#include "catalog/namespace.h"
#include "executor/spi.h"
#include "miscadmin.h"
#include "nodes/makefuncs.h"
#include "utils/builtins.h"
#include "utils/datetime.h"
#include "utils/json.h"
#include "utils/timestamp.h"
#include "utils/guc.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/regproc.h"
#include "utils/resowner.h"
#include "utils/syscache.h"
#include "utils/ruleutils.h"
#include "utils/varlena.h"

#include "spi_util.h"

ErrorData *
run_in_subtransaction(void (*fn) (void *arg), void *arg)
{
	MemoryContext cxt = CurrentMemoryContext;
	ResourceOwner owner = CurrentResourceOwner;
	ErrorData  *volatile edata = NULL;

	BeginInternalSubTransaction(NULL);
	MemoryContextSwitchTo(cxt);
	PG_TRY();
	{
		fn(arg);
		ReleaseCurrentSubTransaction();
	}
	PG_CATCH();
	{
		MemoryContextSwitchTo(cxt);
		edata = CopyErrorData();
		FlushErrorState();
		RollbackAndReleaseCurrentSubTransaction();
	}
	PG_END_TRY();
	MemoryContextSwitchTo(cxt);
	CurrentResourceOwner = owner;
	return edata;
}

void
role_switch_enter(RoleSwitch *save, Oid role)
{
	save->guc_level = 0;
	save->owner_guc_level = 0;
	GetUserIdAndSecContext(&save->saved_userid, &save->saved_sec_context);
	SetUserIdAndSecContext(role, save->saved_sec_context | SECURITY_LOCAL_USERID_CHANGE);
}

void
role_restricted_enter(RoleSwitch *save, Oid role)
{
	/*
	 * The owner dropped (after REASSIGN OWNED of its tables): its code would
	 * run as no role, failing on the first privilege it needs, saying that
	 */
	if (!SearchSysCacheExists1(AUTHOID, ObjectIdGetDatum(role)))
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_OBJECT),
				 errmsg("role with OID %u, which owns the query, no longer exists", role),
				 errhint("Drop the query and create it again as another role.")));
	save->guc_level = 0;
	save->owner_guc_level = NewGUCNestLevel();
	GetUserIdAndSecContext(&save->saved_userid, &save->saved_sec_context);
	if (role != save->saved_userid)
		SetUserIdAndSecContext(role, save->saved_sec_context | SECURITY_LOCAL_USERID_CHANGE |
							   SECURITY_RESTRICTED_OPERATION);
}

void
role_switch_leave(RoleSwitch *save)
{
	if (save->owner_guc_level > 0)
		AtEOXact_GUC(false, save->owner_guc_level);
	SetUserIdAndSecContext(save->saved_userid, save->saved_sec_context);
}

void
spi_run(const char *sql)
{
	int			rc = SPI_execute(sql, false, 0);

	if (rc < 0)
		elog(ERROR, "streamwin: statement failed (%s): %s", SPI_result_code_string(rc), sql);
}

char *
qualified_relname(Oid relid)
{
	char	   *name = get_rel_name(relid);

	if (name == NULL)
		elog(ERROR, "streamwin: relation with OID %u does not exist", relid);
	return quote_qualified_identifier(get_namespace_name(get_rel_namespace(relid)), name);
}

char *
quote_name_text(const char *name)
{
	RangeVar   *rv = makeRangeVarFromNameList(stringToQualifiedNameList(name));

	return rv->schemaname ? quote_qualified_identifier(rv->schemaname, rv->relname)
		: pstrdup(quote_identifier(rv->relname));
}

/*
 * Until AtEOXact_GUC(true, level): search_path pinned to pg_catalog, so
 * that every name is written qualified, and constants written as batches
 * read them back whatever the session that creates a query has set: dates
 * in SQL_DATESTYLE (a DMY or German style would turn 01/03 into 3 January),
 * intervals in SQL_INTERVALSTYLE, timestamptz in UTC (a zone abbreviation
 * can mean another zone where it is read), floats with every digit, money
 * in the server's lc_monetary.
 */
static int
push_deparse_settings(void)
{
	int			level = NewGUCNestLevel();
	static const char *const settings[][2] = {
		{"search_path", "pg_catalog"},
		{"DateStyle", SQL_DATESTYLE},
		{"IntervalStyle", SQL_INTERVALSTYLE},
		{"TimeZone", "UTC"},
		{"extra_float_digits", "3"},
	};

	for (int i = 0; i < (int) lengthof(settings); i++)
		(void) set_config_option(settings[i][0], settings[i][1], PGC_USERSET, PGC_S_SESSION,
								 GUC_ACTION_SAVE, true, 0, false);
	/* money as batches read it: in the server's lc_monetary (batch.c) */
	(void) set_config_option("lc_monetary", GetConfigOptionResetString("lc_monetary"), PGC_USERSET,
							 PGC_S_SESSION, GUC_ACTION_SAVE, true, 0, false);
	return level;
}

char *
deparse_query_qualified(Query *query)
{
	int			level = push_deparse_settings();
	char	   *sql = pg_get_querydef(query, false);

	AtEOXact_GUC(true, level);
	return sql;
}

char *
deparse_expr_qualified(Node *expr, List *dpcontext)
{
	int			level = push_deparse_settings();
	char	   *sql = deparse_expression(expr, dpcontext, false, false);

	AtEOXact_GUC(true, level);
	return sql;
}

void
tuple_from_body(HeapTuple tuple, const char *body, size_t len)
{
	tuple->t_data = (HeapTupleHeader) body;
	tuple->t_len = (uint32) len;
	ItemPointerSetInvalid(&tuple->t_self);
	tuple->t_tableOid = InvalidOid;
}

/*
 * In ISO form whatever the session's DateStyle ('SQL, DMY' would write
 * 01/03/2024 ... CET, which JSON readers take for another date or none), in
 * the session's zone.
 */
void
json_append_timestamp(StringInfo buf, const char *key, bool has, TimestampTz ts)
{
	struct pg_tm tm;
	fsec_t		fsec;
	int			tz;
	const char *tzn;
	char		text[MAXDATELEN + 1];

	appendStringInfo(buf, ", \"%s\": ", key);
	if (!has)
		appendStringInfoString(buf, "null");
	else if (TIMESTAMP_NOT_FINITE(ts) || timestamp2tm(ts, &tz, &tm, &fsec, &tzn, NULL) != 0)
		escape_json(buf, DatumGetCString(DirectFunctionCall1(timestamptz_out,
															 TimestampTzGetDatum(ts))));
	else
	{
		EncodeDateTime(&tm, fsec, true, tz, tzn, USE_ISO_DATES, text);
		escape_json(buf, text);
	}
}

void
check_args_not_null(FunctionCallInfo fcinfo, int nargs, const char *const *names)
{
	for (int i = 0; i < nargs; i++)
		if (PG_ARGISNULL(i))
			ereport(ERROR,
					(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
					 errmsg("%s must not be NULL", names[i])));
}
