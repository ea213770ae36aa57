/*-------------------------------------------------------------------------
 *
 * catalog_access.c
 *	  How streamwin runs statements on its own catalog: as the extension's
 *	  owner, with plans kept per backend, once the catalog's version is the
 *	  library's (see catalog_access.h).
 *
 * The catalog tables are not writable (and source_catalog not readable) by
 * ordinary roles: sources may hold credentials, and offsets must only move
 * through a batch.  streamwin's C functions therefore switch to the
 * extension's owner for the statements that touch the catalog, and run
 * everything that touches user data (source rows, joined tables, result
 * and state tables) as the calling role or the query's owner.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/genam.h"
#include "access/htup_details.h"
#include "access/table.h"
#include "catalog/dependency.h"
#include "common/hashfn.h"
#include "catalog/pg_class.h"
#include "catalog/pg_extension.h"
#include "catalog/pg_index.h"
#include "catalog/pg_inherits.h"
#include "commands/extension.h"
#include "executor/spi.h"
#include "miscadmin.h"
#include "nodes/nodeFuncs.h"
#include "storage/lmgr.h"
#include "storage/proc.h"
#include "utils/acl.h"
#include "utils/builtins.h"
#include "utils/fmgroids.h"
#include "utils/guc.h"
#include "utils/memutils.h"
#include "utils/rel.h"
#include "utils/syscache.h"

#include "catalog_access.h"
#include "catalog_types.h"

/*
 * What the streamwin row of pg_extension said, read at most once per
 * transaction: in the transaction whose local id is extension_read_lxid.
 * Not once per backend, because a worker lives on while the row changes
 * under it: REASSIGN OWNED hands the extension to another role (the old
 * one may then lose superuser or be dropped), and ALTER EXTENSION UPDATE
 * moves the catalog past the library this backend loaded.
 */
static LocalTransactionId extension_read_lxid = InvalidLocalTransactionId;
static Oid	extension_owner_cache = InvalidOid;
static bool catalog_version_checked = false;

/*
 * Read the streamwin row of pg_extension: its owner, and (if version is not
 * NULL) its installed version, palloc'd.
 */
static Oid
read_extension(char **version)
{
	Relation	rel;
	ScanKeyData key;
	SysScanDesc scan;
	HeapTuple	tup;
	Oid			owner;

	rel = table_open(ExtensionRelationId, AccessShareLock);
	ScanKeyInit(&key, Anum_pg_extension_extname, BTEqualStrategyNumber,
				F_NAMEEQ, CStringGetDatum("streamwin"));
	scan = systable_beginscan(rel, ExtensionNameIndexId, true, NULL, 1, &key);
	tup = systable_getnext(scan);
	if (!HeapTupleIsValid(tup))
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_OBJECT),
				 errmsg("extension \"streamwin\" is not installed in this database"),
				 errhint("Run CREATE EXTENSION streamwin.")));
	owner = ((Form_pg_extension) GETSTRUCT(tup))->extowner;
	if (version)
	{
		bool		isnull;
		Datum		d = heap_getattr(tup, Anum_pg_extension_extversion,
									 RelationGetDescr(rel), &isnull);

		*version = isnull ? pstrdup("?") : TextDatumGetCString(d);
	}
	systable_endscan(scan);
	table_close(rel, AccessShareLock);
	return owner;
}

/* Forget what the row said in an earlier transaction. */
static void
extension_cache_refresh(void)
{
	if (extension_read_lxid == MyProc->lxid)
		return;
	extension_owner_cache = InvalidOid;
	catalog_version_checked = false;
	extension_read_lxid = MyProc->lxid;
}

/* The owner of the streamwin extension in this database. */
static Oid
extension_owner(void)
{
	extension_cache_refresh();
	if (!OidIsValid(extension_owner_cache))
		extension_owner_cache = read_extension(NULL);
	return extension_owner_cache;
}

/* What a catalog at another version than the library's says, and does. */
#define VERSION_MISMATCH_MESSAGE \
	"streamwin's catalog in this database is at version %s, but its library needs version %s"
#define VERSION_OLDER_DETAIL \
	"The streamwin library was upgraded; the extension's catalog was not."
#define VERSION_OLDER_HINT \
	"Run ALTER EXTENSION streamwin UPDATE in this database."
#define VERSION_NEWER_DETAIL \
	"The extension's catalog was updated, but this server still runs the streamwin library it loaded when it started."
#define VERSION_NEWER_HINT \
	"Restart the server, which loads the library installed now."

/* version as major * 1000 + minor ("0.9": 9) */
static int
version_number(const char *version)
{
	int			major = 0;
	int			minor = 0;

	(void) sscanf(version, "%d.%d", &major, &minor);
	return major * 1000 + minor;
}

/* Is the catalog at a later version than the library (not yet restarted)? */
static bool
catalog_is_newer(const char *version)
{
	return version_number(version) > version_number(STREAMWIN_CATALOG_VERSION);
}

/*
 * The library reads and writes the catalog of one extension version.  A
 * package upgrade replaces the library at once, while each database's
 * catalog stays at its old version until ALTER EXTENSION streamwin UPDATE:
 * until then, say so, instead of failing on a column that is not there.
 * And the other way round: a worker that loaded the library before the
 * package upgrade runs on after ALTER EXTENSION UPDATE, and must stop
 * rather than write a catalog it does not know.  Checked once per
 * transaction.
 */
void
catalog_check_version(void)
{
	char	   *version;

	extension_cache_refresh();
	if (catalog_version_checked)
		return;
	(void) read_extension(&version);
	if (strcmp(version, STREAMWIN_CATALOG_VERSION) != 0)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg(VERSION_MISMATCH_MESSAGE, version, STREAMWIN_CATALOG_VERSION),
				 errdetail(catalog_is_newer(version) ? VERSION_NEWER_DETAIL : VERSION_OLDER_DETAIL),
				 errhint(catalog_is_newer(version) ? VERSION_NEWER_HINT : VERSION_OLDER_HINT)));
	catalog_version_checked = true;
}

bool
catalog_version_is_current(void)
{
	return catalog_version_mismatch() == NULL;
}

char *
catalog_version_mismatch(void)
{
	char	   *version;

	extension_cache_refresh();
	if (catalog_version_checked)
		return NULL;
	(void) read_extension(&version);
	if (strcmp(version, STREAMWIN_CATALOG_VERSION) == 0)
		return NULL;
	return psprintf(VERSION_MISMATCH_MESSAGE "\nHINT: %s",
					version, STREAMWIN_CATALOG_VERSION,
					catalog_is_newer(version) ? VERSION_NEWER_HINT : VERSION_OLDER_HINT);
}

/*
 * catalog_enter / catalog_leave
 *		Run the statements between them as the extension owner, with
 *		search_path pinned to pg_catalog, pg_temp: they are parsed in the
 *		caller's session, whose search_path the caller chooses, and an
 *		operator or function of the caller's in a schema searched before
 *		pg_catalog would otherwise run as the owner (a superuser).  An error
 *		in between needs no catalog_leave: transaction (and subtransaction)
 *		abort restores the user id and the setting.
 */
void
catalog_enter(RoleSwitch *save)
{
	role_switch_enter(save, extension_owner());
	save->guc_level = NewGUCNestLevel();
	(void) set_config_option("search_path", "pg_catalog, pg_temp", PGC_USERSET, PGC_S_SESSION,
							 GUC_ACTION_SAVE, true, 0, false);
}

void
catalog_leave(RoleSwitch *save)
{
	AtEOXact_GUC(true, save->guc_level);
	role_switch_leave(save);
}

static bool
is_user_function(Oid funcid, void *context)
{
	return funcid >= FirstNormalObjectId;
}

typedef struct CallSearch
{
	check_function_callback checker;
	void	   *context;
} CallSearch;

static bool
call_search_walker(Node *node, CallSearch *search)
{
	if (node == NULL)
		return false;
	if (check_functions_in_node(node, search->checker, search->context))
		return true;
	return expression_tree_walker(node, call_search_walker, search);
}

/* See catalog_access.h */
bool
expr_calls_function(Node *node, check_function_callback checker, void *context)
{
	CallSearch	search = {checker, context};

	return call_search_walker(node, &search);
}

/* See catalog_access.h */
bool
expr_calls_user_function(Node *node)
{
	return expr_calls_function(node, is_user_function, NULL);
}

/*
 * Does an index of the table have an expression or predicate that calls a
 * function not built in?  The planner evaluates such a call where it reads
 * the index's definition (eval_const_expressions of the expressions and
 * predicate of every index of a table a statement reads or writes) if its
 * arguments are constants, also inside a SQL function it inlines: any call
 * of the owner's may be one.  Read from pg_index as text, which evaluates
 * nothing.
 */
static bool
has_index_calling_user_function(Relation rel)
{
	List	   *indexes = RelationGetIndexList(rel);
	ListCell   *lc;
	bool		found = false;

	foreach(lc, indexes)
	{
		HeapTuple	tup = SearchSysCache1(INDEXRELID, ObjectIdGetDatum(lfirst_oid(lc)));
		AttrNumber	parts[2] = {Anum_pg_index_indexprs, Anum_pg_index_indpred};

		if (!HeapTupleIsValid(tup))
			continue;
		for (int i = 0; i < 2 && !found; i++)
		{
			bool		isnull;
			Datum		d = SysCacheGetAttr(INDEXRELID, tup, parts[i], &isnull);

			if (!isnull)
				found = expr_calls_user_function(stringToNode(TextDatumGetCString(d)));
		}
		ReleaseSysCache(tup);
		if (found)
			break;
	}
	list_free(indexes);
	return found;
}

/*
 * catalog_check_plain_table
 *		Lock a table of a query's (state, checkpoint, join or dedup table,
 *		which its owner owns) in `mode` for a statement run on it as the
 *		extension owner, and refuse it unless it is still a plain table as
 *		streamwin made it: without triggers, rules, CHECK constraints,
 *		generated columns, or an index whose expression or predicate calls
 *		a function not built in, each of which would run the owner's code
 *		as the extension owner.  (streamwin indexes a join's key
 *		expressions only where they are built of PostgreSQL's functions.)
 *		The lock keeps new ones out until the transaction ends.
 */
void
catalog_check_plain_table(Oid relid, LOCKMODE mode)
{
	Relation	rel = table_open(relid, mode);
	TupleConstr *constr = RelationGetDescr(rel)->constr;

	/*
	 * Nor tables of the owner's that inherit from it (a statement on the
	 * table reaches theirs, and their triggers), or a parent it was made a
	 * partition of (whose partition bound may call the owner's function).
	 * streamwin's statements name the table with ONLY as well: a table that
	 * inherits from it may come after this check.
	 */
	bool		plain = rel->rd_rel->relkind == RELKIND_RELATION && rel->trigdesc == NULL &&
		rel->rd_rules == NULL &&
		(constr == NULL || (constr->num_check == 0 && !constr->has_generated_stored)) &&
		!rel->rd_rel->relispartition && find_inheritance_children(relid, NoLock) == NIL &&
		!has_index_calling_user_function(rel);

	if (!plain)
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				 errmsg("streamwin's table \"%s\" has triggers, rules, constraints, generated columns, indexes calling functions not built in or tables that inherit from it, or is no longer a table",
						RelationGetRelationName(rel)),
				 errdetail("streamwin writes and reads it as the extension's owner, and would run their code so."),
				 errhint("Drop what was added to the table.")));
	table_close(rel, NoLock);
}

/*
 * catalog_check_table_pair
 *		catalog_check_plain_table of a query's UNLOGGED table and its logged
 *		copy (a state table and its checkpoint), locked in their modes, and
 *		refused unless their columns are still of the same types: rows are
 *		copied between them as the extension owner, and a column whose type
 *		its owner changed would be cast, by a function of its owner's perhaps.
 */
void
catalog_check_table_pair(Oid a, LOCKMODE amode, Oid b, LOCKMODE bmode)
{
	Relation	ra;
	Relation	rb;
	TupleDesc	da;
	TupleDesc	db;
	int			i = 0;
	int			j = 0;

	catalog_check_plain_table(a, amode);
	catalog_check_plain_table(b, bmode);
	ra = table_open(a, NoLock);
	rb = table_open(b, NoLock);
	da = RelationGetDescr(ra);
	db = RelationGetDescr(rb);
	for (;;)
	{
		while (i < da->natts && TupleDescAttr(da, i)->attisdropped)
			i++;
		while (j < db->natts && TupleDescAttr(db, j)->attisdropped)
			j++;
		if (i == da->natts || j == db->natts)
			break;
		if (TupleDescAttr(da, i)->atttypid != TupleDescAttr(db, j)->atttypid)
			break;
		i++;
		j++;
	}
	if (i != da->natts || j != db->natts)
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				 errmsg("streamwin's tables \"%s\" and \"%s\" no longer have the same columns",
						RelationGetRelationName(ra), RelationGetRelationName(rb)),
				 errdetail("streamwin copies rows between them as the extension's owner."),
				 errhint("Drop the query and create it again.")));
	table_close(ra, NoLock);
	table_close(rb, NoLock);
}

/*
 * catalog_check_owner
 *		Only the owner of a source or query (or a member of the owning role,
 *		or a superuser) may change it.
 */
void
catalog_check_owner(Oid owner, const char *kind, const char *name)
{
	if (!has_privs_of_role(GetUserId(), owner))
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				 errmsg("must be owner of %s \"%s\"", kind, name)));
}

/*
 * catalog_lock_query
 *		Wait for, then hold until the end of the transaction, the lock that
 *		lets one batch of the query run at a time (and that drop_query and
 *		reset_query take to wait for a batch in progress).  An advisory lock
 *		rather than a row lock on the query's catalog row: a row lock needs a
 *		transaction id and writes WAL, so every empty batch of every idle
 *		query (ten a second on a 100 ms trigger) would cost a transaction
 *		id, a WAL record and a commit to flush.
 */
void
catalog_lock_query(int32 query_id)
{
	LOCKTAG		tag;

	SET_LOCKTAG_ADVISORY(tag, MyDatabaseId, STREAMWIN_LOCK_SPACE, (uint32) query_id, 5);
	(void) LockAcquire(&tag, ExclusiveLock, false, false);
}

/*
 * catalog_lock_new_name
 *		Wait for, then hold until the end of the transaction, the lock on a
 *		name of a new source (kind 's') or query ('q'), taken before the
 *		name is looked for: of two sessions creating the same name, the
 *		second then finds the first's, once it commits, and says it exists,
 *		rather than fail on a unique index of the catalog or of the tables
 *		it was making.
 */
void
catalog_lock_new_name(char kind, const char *name)
{
	LOCKTAG		tag;
	uint32		hash = DatumGetUInt32(hash_any((const unsigned char *) name, (int) strlen(name)));

	SET_LOCKTAG_ADVISORY(tag, MyDatabaseId, STREAMWIN_LOCK_SPACE, hash, kind == 's' ? 6 : 7);
	(void) LockAcquire(&tag, ExclusiveLock, false, false);
}

/*
 * catalog_exec
 *		Run one of streamwin's own statements on its catalog, as the
 *		extension owner, with a plan prepared once per backend and kept: the
 *		per-batch bookkeeping (locking the query, offsets, progress) would
 *		otherwise be parsed and planned again for every batch.  `sql` must be
 *		a constant text, which identifies the plan.  Errors if the statement
 *		fails; returns the SPI result code.  Must be called inside SPI.
 */
typedef struct CatalogPlan
{
	const char *sql;
	SPIPlanPtr	plan;
	struct CatalogPlan *next;
} CatalogPlan;

static CatalogPlan *catalog_plans = NULL;

int
catalog_exec(const char *sql, int nargs, Oid *types, Datum *args, const char *nulls,
			 long count)
{
	CatalogPlan *p;
	RoleSwitch	role;
	int			rc;

	/* no statement of this library on a catalog of another version */
	catalog_check_version();
	for (p = catalog_plans; p != NULL; p = p->next)
		if (p->sql == sql || strcmp(p->sql, sql) == 0)
			break;
	catalog_enter(&role);
	if (p == NULL)
	{
		SPIPlanPtr	plan = SPI_prepare(sql, nargs, types);

		if (plan == NULL)
			elog(ERROR, "streamwin: could not prepare \"%s\": %s", sql,
				 SPI_result_code_string(SPI_result));
		SPI_keepplan(plan);
		p = MemoryContextAlloc(TopMemoryContext, sizeof(CatalogPlan));
		p->sql = MemoryContextStrdup(TopMemoryContext, sql);
		p->plan = plan;
		p->next = catalog_plans;
		catalog_plans = p;
	}
	rc = SPI_execute_plan(p->plan, args, nulls, false, count);
	catalog_leave(&role);
	if (rc < 0)
		elog(ERROR, "streamwin catalog statement failed (%s): %s", SPI_result_code_string(rc), sql);
	return rc;
}

/*
 * catalog_table_depends_on_extension
 *		A table streamwin creates for a query (state, checkpoint, dedup
 *		keys) depends on the extension, as an ordinary dependency: DROP
 *		EXTENSION names it and, with CASCADE, drops it.  Without that the
 *		tables would outlive the extension in its schema, and a new
 *		installation, numbering its queries from 1 again, would collide with
 *		them.  Not an extension member: pg_dump must still dump them.
 */
void
catalog_table_depends_on_extension(Oid relid)
{
	ObjectAddress table;
	ObjectAddress extension;

	ObjectAddressSet(table, RelationRelationId, relid);
	ObjectAddressSet(extension, ExtensionRelationId, get_extension_oid("streamwin", false));
	recordDependencyOn(&table, &extension, DEPENDENCY_NORMAL);
}
