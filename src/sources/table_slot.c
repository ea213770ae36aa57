/*-------------------------------------------------------------------------
 *
 * table_slot.c
 *	  The logical replication slot of each table source: created with the
 *	  source, acquired by a fetch, confirmed as far as every query of the
 *	  source allows, dropped with the source or reaped when orphaned.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/detoast.h"
#include "access/heaptoast.h"
#include "access/htup_details.h"
#include "access/xact.h"
#include "access/xlog.h"
#include "access/xlog_internal.h"
#include "access/xlogutils.h"
#include "catalog/catalog.h"
#include "catalog/pg_class.h"
#include "catalog/pg_type.h"
#include "miscadmin.h"
#include "replication/decode.h"
#include "replication/logical.h"
#include "replication/output_plugin.h"
#include "replication/slot.h"
#include "storage/condition_variable.h"
#include "storage/lmgr.h"
#include "storage/lock.h"
#include "storage/proc.h"
#include "storage/spin.h"
#include "storage/standby.h"
#include "utils/acl.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/elog.h"
#include "utils/guc.h"
#include "utils/inval.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/resowner.h"
#include "utils/rel.h"
#include "utils/timestamp.h"
#include "utils/tuplestore.h"
#include "utils/wait_event.h"
#include "executor/spi.h"
#include "executor/tuptable.h"

#include "catalog.h"
#include "spi_util.h"
#include "catalog_types.h"
#include "sql_function.h"
#include "table_source_int.h"

STREAMWIN_SQL_FUNCTION(streamwin_create_table_source_slot);

/* streamwin.retained_wal_warning, in MB (-1: no warning) */
int			streamwin_retained_wal_warning = 1024;

/* A slot being created, held by this backend until its transaction ends. */
static char *creating_slot = NULL;
static List *dropping_slots = NIL;	/* of names, in TopMemoryContext */
static bool xact_callback_registered = false;

/*
 * Recent PostgreSQL 15 releases only load output plugins listed in
 * output_plugin_libraries (a superuser setting), a guard against roles with
 * REPLICATION loading arbitrary libraries.  streamwin's plugin is loaded by
 * streamwin's own code, in this backend, and refuses any other use (see
 * plugin_startup), so it adds itself to the list for the duration of the
 * call.  Returns the GUC nest level to pass to AtEOXact_GUC, or -1.
 */
int
allow_own_plugin(void)
{
	const char *list = GetConfigOption("output_plugin_libraries", true, false);
	int			level;

	if (list == NULL)
		return -1;				/* an older release: no such guard */
	level = NewGUCNestLevel();
	(void) set_config_option("output_plugin_libraries",
							 list[0] ? psprintf("%s, streamwin", list) : "streamwin",
							 PGC_SUSET, PGC_S_SESSION, GUC_ACTION_SAVE, true, 0, false);
	return level;
}

void
restore_plugin_list(int level)
{
	if (level >= 0)
		AtEOXact_GUC(true, level);
}

static void
check_wal_level(void)
{
	if (wal_level < WAL_LEVEL_LOGICAL)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("table sources need wal_level = logical"),
				 errdetail("wal_level is \"%s\"; streamwin reads a table's inserts through logical decoding.",
						   GetConfigOption("wal_level", false, false)),
				 errhint("Set wal_level = logical in postgresql.conf (or with ALTER SYSTEM SET wal_level = logical) and restart the server.")));
}

void
table_source_check_relation(Oid relid)
{
	char		relkind = get_rel_relkind(relid);
	char	   *name = get_rel_name(relid);
	AclResult	acl;

	check_wal_level();
	if (name == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_TABLE),
				 errmsg("relation with OID %u does not exist", relid)));
	if (relkind == RELKIND_PARTITIONED_TABLE)
		ereport(ERROR,
				(errcode(ERRCODE_WRONG_OBJECT_TYPE),
				 errmsg("\"%s\" is a partitioned table", name),
				 errdetail("Table sources read plain tables; inserts into a partitioned table are stored in its partitions."),
				 errhint("Create a source for each partition.")));
	if (relkind != RELKIND_RELATION)
		ereport(ERROR,
				(errcode(ERRCODE_WRONG_OBJECT_TYPE),
				 errmsg("\"%s\" is not a table", name),
				 errhint("A table source reads the rows inserted into an ordinary table.")));
	if (IsCatalogRelationOid(relid))
		ereport(ERROR,
				(errcode(ERRCODE_WRONG_OBJECT_TYPE),
				 errmsg("\"%s\" is a system catalog", name),
				 errhint("A table source reads the rows inserted into a user table.")));
	if (get_rel_persistence(relid) != RELPERSISTENCE_PERMANENT)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("table \"%s\" is %s", name,
						get_rel_persistence(relid) == RELPERSISTENCE_TEMP ? "temporary" : "unlogged"),
				 errdetail("Its rows are not written to the WAL, which is what a table source reads."),
				 get_rel_persistence(relid) == RELPERSISTENCE_TEMP ?
				 errhint("Use a permanent table.") :
				 errhint("Use a permanent table (ALTER TABLE %s SET LOGGED).",
						 quote_qualified_identifier(get_namespace_name(get_rel_namespace(relid)), name))));
	acl = pg_class_aclcheck(relid, GetUserId(), ACL_SELECT);
	if (acl != ACLCHECK_OK)
		aclcheck_error(acl, OBJECT_TABLE, name);
}

/*
 * Is slot_name a slot of this database?  A database restored from a dump (or
 * copied from another) has the catalog, slot names included, of one whose
 * slots it does not own: those it must neither read, nor advance, nor drop.
 */
bool
slot_is_ours(const char *slot_name)
{
	ReplicationSlot *slot = SearchNamedReplicationSlot(slot_name, true);

	return slot != NULL && slot->data.database == MyDatabaseId;
}

/* How long a commit that drops a slot waits for its holder to let go */
#define SLOT_DROP_WAIT_MS 5000

/*
 * Is the slot free, or does it become free within SLOT_DROP_WAIT_MS?  A
 * worker of a query dropped in the same transaction lets it go when its
 * batch ends; one that waits for this transaction (a batch that began
 * after the drop and waits for the query's lock) never does before it
 * commits.
 */
static bool
slot_free_soon(const char *slot_name)
{
	ReplicationSlot *slot = SearchNamedReplicationSlot(slot_name, true);
	TimestampTz until = TimestampTzPlusMilliseconds(GetCurrentTimestamp(), SLOT_DROP_WAIT_MS);
	bool		released = false;

	if (slot == NULL)
		return false;
	ConditionVariablePrepareToSleep(&slot->active_cv);
	for (;;)
	{
		long		left;

		SpinLockAcquire(&slot->mutex);
		released = slot->active_pid == 0;
		SpinLockRelease(&slot->mutex);
		left = TimestampDifferenceMilliseconds(GetCurrentTimestamp(), until);
		if (released || left <= 0)
			break;
		(void) ConditionVariableTimedSleep(&slot->active_cv, left, WAIT_EVENT_REPLICATION_SLOT_DROP);
	}
	ConditionVariableCancelSleep();
	return released;
}

/* Make the slot created by this transaction persistent at commit; drop others. */
static void
slot_xact_callback(XactEvent event, void *arg)
{
	switch (event)
	{
		case XACT_EVENT_PRE_COMMIT:
			/* first: dropping a slot acquires it, which needs ours released */
			if (creating_slot != NULL && MyReplicationSlot != NULL)
			{
				ReplicationSlotPersist();
				ReplicationSlotRelease();
			}
			if (creating_slot != NULL)
				pfree(creating_slot);
			creating_slot = NULL;
			if (dropping_slots != NIL)
			{
				List	   *names = dropping_slots;
				ListCell   *lc;

				dropping_slots = NIL;
				foreach(lc, names)
				{
					const char *name = lfirst(lc);

					/*
					 * One a process still holds after a while (the worker
					 * of a query this transaction dropped, waiting for it
					 * to end) is left to the launcher's reaper: waiting
					 * here for it to let go would wait for good.
					 */
					if (slot_is_ours(name) && slot_free_soon(name))
						ReplicationSlotDrop(name, true);
				}
				list_free_deep(names);
			}
			break;
		case XACT_EVENT_ABORT:
		case XACT_EVENT_PARALLEL_ABORT:
			/* an ephemeral slot disappears when released */
			if (creating_slot != NULL && MyReplicationSlot != NULL)
				ReplicationSlotRelease();
			if (creating_slot != NULL)
				pfree(creating_slot);
			creating_slot = NULL;
			list_free_deep(dropping_slots);
			dropping_slots = NIL;
			break;
		default:
			break;
	}
}

static void
register_xact_callback(void)
{
	if (!xact_callback_registered)
	{
		RegisterXactCallback(slot_xact_callback, NULL);
		xact_callback_registered = true;
	}
}

/*
 * The lock that orders slot creation with the orphan reaper below: creators
 * hold it shared until their transaction ends (when the new source's
 * catalog row is visible), the reaper exclusively while it looks.
 */
static bool
lock_slot_registry(LOCKMODE mode, bool dont_wait)
{
	LOCKTAG		tag;

	/* see STREAMWIN_LOCK_SPACE in catalog_types.h */
	SET_LOCKTAG_ADVISORY(tag, MyDatabaseId, STREAMWIN_LOCK_SPACE, 0, 3);
	return LockAcquire(&tag, mode, false, dont_wait) != LOCKACQUIRE_NOT_AVAIL;
}

/*
 * Refuse a slot creation that PostgreSQL would refuse, saying what to do:
 * for create_table_source, or for reset_query replacing an invalidated
 * slot.
 */
static void
check_slot_creation(bool replacing)
{
	check_wal_level();
	CheckLogicalDecodingRequirements();
	if (TransactionIdIsValid(GetTopTransactionIdIfAny()))
		ereport(ERROR,
				(errcode(ERRCODE_ACTIVE_SQL_TRANSACTION),
				 replacing ?
				 errmsg("cannot replace the replication slot of a table source in a transaction that has already written") :
				 errmsg("cannot create a table source in a transaction that has already written"),
				 errdetail("A table source creates a logical replication slot, which PostgreSQL only allows before the transaction's first write."),
				 replacing ?
				 errhint("Call streamwin.reset_query() in a transaction of its own, or first in it.") :
				 errhint("Call streamwin.create_table_source() in a transaction of its own, or first in it.")));
	if (MyReplicationSlot != NULL)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("cannot create two table sources in one transaction"),
				 errhint("Commit after each streamwin.create_table_source().")));
}

char *
source_slot_create(void)
{
	char		name[NAMEDATALEN];
	LogicalDecodingContext *ctx;
	int			level;
	ResourceOwner owner = CurrentResourceOwner;
	MemoryContext cxt = CurrentMemoryContext;

	check_slot_creation(false);
	(void) lock_slot_registry(ShareLock, false);

	/* unique in the cluster: slots are shared by every database */
	snprintf(name, sizeof(name), "streamwin_%u_%llx",
			 MyDatabaseId, (unsigned long long) GetCurrentTimestamp());
	register_xact_callback();
	ReplicationSlotCreate(name, true, RS_EPHEMERAL, false);
	creating_slot = MemoryContextStrdup(TopMemoryContext, name);
	level = allow_own_plugin();
	ctx = CreateInitDecodingContext("streamwin", NIL, false, InvalidXLogRecPtr,
									LOCAL_WAL_READER,
									no_prepare_write, no_write, NULL);
	DecodingContextFindStartpoint(ctx);
	FreeDecodingContext(ctx);
	restore_plugin_list(level);

	/*
	 * Finding the start point decodes the transactions that end while it
	 * waits for a consistent point, each in an internal subtransaction,
	 * whose end leaves CurrentResourceOwner at the top transaction's: the
	 * statement that called this function would then release its snapshot
	 * from the wrong owner ("snapshot reference ... is not owned by
	 * resource owner TopTransaction"), when other transactions ran meanwhile;
	 * and CurrentMemoryContext at whichever it last used.
	 */
	CurrentResourceOwner = owner;
	MemoryContextSwitchTo(cxt);
	return pstrdup(name);
}

/* --- who may create a slot ------------------------------------------------ */

/*
 * A table source's slot keeps WAL for as long as its slowest query lags,
 * and enough of it stops the whole server, which is why PostgreSQL lets
 * only superusers and roles with REPLICATION create slots.  streamwin
 * keeps table sources to those roles too, and to the roles an
 * administrator grants EXECUTE on SLOT_FUNCTION: every slot of a table
 * source is created inside that function, and the install and update
 * scripts revoke its EXECUTE from PUBLIC.
 *
 * create_table_source itself stays open to PUBLIC, so that a role refused
 * is told why and what to GRANT.  It then reaches SLOT_FUNCTION through the
 * executor, which checks EXECUTE once more: as the caller when the caller
 * holds it by a GRANT, and as the extension owner for superusers and
 * REPLICATION roles, who hold the privilege by their attribute, as in
 * PostgreSQL, rather than by an ACL.  A role that is neither is refused by
 * PostgreSQL's ACL check as well as by the test below.
 */
#define SLOT_FUNCTION "streamwin.create_table_source_slot()"

static void source_confirm_locktag(LOCKTAG *tag, int32 source_id);

/* Set while source_slot_new() calls SLOT_FUNCTION, which refuses other calls. */
static bool slot_requested = false;

/* May the current user create a slot?  *by_attribute: as superuser or REPLICATION. */
static bool
may_create_slot(bool *by_attribute)
{
	Oid			role = GetUserId();
	Oid			fn;

	*by_attribute = superuser_arg(role) || has_rolreplication(role);
	if (*by_attribute)
		return true;
	fn = DatumGetObjectId(DirectFunctionCall1(regprocedurein, CStringGetDatum(SLOT_FUNCTION)));
	return pg_proc_aclcheck(fn, role, ACL_EXECUTE) == ACLCHECK_OK;
}

void
source_slot_check_privilege(const char *source_name, bool replacing)
{
	bool		by_attribute;
	char	   *role;

	if (may_create_slot(&by_attribute))
		return;
	role = GetUserNameFromId(GetUserId(), false);
	ereport(ERROR,
			(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
			 replacing ?
			 errmsg("permission denied to replace the replication slot of table source \"%s\"",
					source_name) :
			 errmsg("permission denied to create table source \"%s\"", source_name),
			 errdetail("A table source owns a logical replication slot, which keeps WAL for as long as its queries lag behind. "
					   "As PostgreSQL does for replication slots, streamwin allows that to superusers, to roles with the REPLICATION attribute, "
					   "and to roles granted EXECUTE on " SLOT_FUNCTION "."),
			 errhint("A superuser can allow role \"%s\" with: GRANT EXECUTE ON FUNCTION " SLOT_FUNCTION " TO %s;",
					 role, quote_identifier(role))));
}

char *
source_slot_new(const char *source_name, bool replacing)
{
	MemoryContext cxt = CurrentMemoryContext;
	bool		by_attribute;
	RoleSwitch	role;
	char	   *name;

	source_slot_check_privilege(source_name, replacing);
	check_slot_creation(replacing);
	(void) may_create_slot(&by_attribute);
	SPI_connect();
	if (by_attribute)
		catalog_enter(&role);
	slot_requested = true;
	PG_TRY();
	{
		if (SPI_execute("SELECT streamwin.create_table_source_slot()", false, 1) != SPI_OK_SELECT ||
			SPI_processed != 1)
			elog(ERROR, "streamwin: could not create a replication slot");
	}
	PG_FINALLY();
	{
		slot_requested = false;
	}
	PG_END_TRY();
	if (by_attribute)
		catalog_leave(&role);
	name = MemoryContextStrdup(cxt, SPI_getvalue(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1));
	SPI_finish();
	return name;
}

/*
 * streamwin.create_table_source_slot() RETURNS text: the slot of the table
 * source that source_slot_new() is creating; refuses every other call (a
 * slot that no source owns would keep WAL until the launcher reaps it).
 */
Datum
streamwin_create_table_source_slot(PG_FUNCTION_ARGS)
{
	if (!slot_requested)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg(SLOT_FUNCTION " only creates the slot of a table source being created"),
				 errhint("Call streamwin.create_table_source(name, relation); EXECUTE on " SLOT_FUNCTION " is what allows it.")));
	slot_requested = false;		/* one slot per request */
	PG_RETURN_TEXT_P(cstring_to_text(source_slot_create()));
}

void
source_slot_drop_at_commit(const char *slot_name)
{
	MemoryContext old;

	register_xact_callback();
	if (source_slot_dropping(slot_name))
		return;
	old = MemoryContextSwitchTo(TopMemoryContext);
	dropping_slots = lappend(dropping_slots, pstrdup(slot_name));
	MemoryContextSwitchTo(old);
}

bool
source_slot_dropping(const char *slot_name)
{
	ListCell   *lc;

	foreach(lc, dropping_slots)
		if (strcmp(lfirst(lc), slot_name) == 0)
			return true;
	return false;
}

static ReplicationSlot *
find_slot(const char *slot_name)
{
	ReplicationSlot *slot = SearchNamedReplicationSlot(slot_name, true);

	if (slot == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_OBJECT),
				 errmsg("replication slot \"%s\" of a streamwin table source does not exist", slot_name),
				 errdetail("It was dropped by hand, or its creation was never committed, or this database was restored from a dump, which does not carry replication slots, or this server was a standby, where PostgreSQL 15 keeps no logical slots, or pg_upgrade moved this cluster to a later major version without them."),
				 errhint("Drop the source and its queries, and create them again.")));

	/* a restore into another database of this cluster finds the original's */
	if (slot->data.database != MyDatabaseId)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("replication slot \"%s\" of a streamwin table source belongs to another database", slot_name),
				 errdetail("This database was restored from a dump or copied from another, and a dump does not carry replication slots: its table sources have none of their own."),
				 errhint("Drop the source and its queries, and create them again.")));
	return slot;
}

XLogRecPtr
source_slot_confirmed(const char *slot_name)
{
	ReplicationSlot *slot;
	XLogRecPtr	lsn;

	if (MyReplicationSlot != NULL && strcmp(NameStr(MyReplicationSlot->data.name), slot_name) == 0)
		slot = MyReplicationSlot;
	else
		slot = find_slot(slot_name);
	SpinLockAcquire(&slot->mutex);
	lsn = slot->data.confirmed_flush;
	SpinLockRelease(&slot->mutex);
	return lsn;
}

/* --- slots that PostgreSQL invalidated ------------------------------------ */

/*
 * With max_slot_wal_keep_size set, a checkpoint invalidates a slot that
 * retains more WAL than that, and removes the WAL: the slot can never be
 * read again.  PostgreSQL 15 marks it by an invalid restart_lsn, keeping
 * the one it had in invalidated_at.
 */
static bool
slot_invalidated(ReplicationSlot *slot)
{
	bool		invalidated;

	SpinLockAcquire(&slot->mutex);
	invalidated = !XLogRecPtrIsInvalid(slot->data.invalidated_at) &&
		XLogRecPtrIsInvalid(slot->data.restart_lsn);
	SpinLockRelease(&slot->mutex);
	return invalidated;
}

bool
source_slot_invalidated(const char *slot_name)
{
	return slot_is_ours(slot_name) && slot_invalidated(SearchNamedReplicationSlot(slot_name, true));
}

void
slot_check_valid(XLogRecPtr start_lsn)
{
	if (!slot_invalidated(MyReplicationSlot))
		return;
	ereport(ERROR,
			(errcode(ERRCODE_TABLE_POSITION_LOST),
			 errmsg("the table source no longer holds the changes from %X/%X on",
					LSN_FORMAT_ARGS(start_lsn)),
			 errdetail("Its replication slot \"%s\" was invalidated, because it retained more WAL than max_slot_wal_keep_size (now %s) allowed, and the server has removed WAL the slot still needed.",
					   NameStr(MyReplicationSlot->data.name),
					   GetConfigOptionByName("max_slot_wal_keep_size", NULL, false)),
			 errhint("Start the query over with streamwin.reset_query(name, 'earliest'). "
					 "That gives the source a new slot; the changes the invalidated one had not delivered are lost.")));
}

void
source_slot_replace_invalidated(int32 source_id, const char *source_name, const char *slot_name)
{
	MemoryContext cxt = CurrentMemoryContext;
	LOCKTAG		tag;
	char	   *old_slot;
	char	   *new_slot;
	XLogRecPtr	old_confirmed;
	XLogRecPtr	new_confirmed;

	if (!source_slot_invalidated(slot_name))
		return;

	/*
	 * One replacement at a time (a reset of another query of the source
	 * waits, then finds the new slot), and meanwhile no batch confirms the
	 * slot and no query's start is set (see source_hold_start).
	 */
	source_confirm_locktag(&tag, source_id);
	(void) LockAcquire(&tag, ExclusiveLock, false, false);
	old_slot = catalog_source_slot(source_id);
	if (old_slot == NULL || !source_slot_invalidated(old_slot))
		return;
	old_confirmed = source_slot_confirmed(old_slot);
	SPI_connect();
	new_slot = MemoryContextStrdup(cxt, source_slot_new(source_name, true));
	SPI_finish();
	new_confirmed = source_slot_confirmed(new_slot);
	catalog_set_source_slot(source_id, new_slot);
	source_slot_drop_at_commit(old_slot);
	ereport(WARNING,
			(errmsg("table source \"%s\" has a new replication slot, \"%s\", in place of \"%s\", which PostgreSQL invalidated",
					source_name, new_slot, old_slot),
			 errdetail("The changes committed between %X/%X, where the invalidated slot stood, and %X/%X, where the new one starts, are lost to each query of the source that had not read them.",
					   LSN_FORMAT_ARGS(old_confirmed), LSN_FORMAT_ARGS(new_confirmed)),
			 errhint("Reset the other queries of the source too: until then they fail, their positions being before the new slot's start.")));
}

/* at most this many processes are followed from the slot's holder */
#define WAIT_CHAIN_MAX	64

/*
 * Is process pid waiting for a lock that this backend holds, itself or
 * through processes that wait in turn (it waits for one that waits for
 * one ... that waits for us)?  Breadth first over pg_blocking_pids, each
 * process once, up to WAIT_CHAIN_MAX of them.
 */
static bool
waits_for_us(int pid)
{
	int			seen[WAIT_CHAIN_MAX];
	int			nseen = 1;

	seen[0] = pid;
	for (int next = 0; next < nseen; next++)
	{
		ArrayType  *blockers = DatumGetArrayTypeP(DirectFunctionCall1(pg_blocking_pids,
																	  Int32GetDatum(seen[next])));
		Datum	   *pids;
		int			n;

		deconstruct_array(blockers, INT4OID, sizeof(int32), true, TYPALIGN_INT, &pids, NULL, &n);
		for (int i = 0; i < n; i++)
		{
			int			blocker = DatumGetInt32(pids[i]);
			bool		known = false;

			if (blocker == MyProcPid)
				return true;	/* (the arrays go with the error's memory) */
			for (int k = 0; k < nseen && !known; k++)
				known = seen[k] == blocker;
			if (!known && nseen < WAIT_CHAIN_MAX)
				seen[nseen++] = blocker;
		}
		pfree(pids);
		pfree(blockers);
	}
	return false;
}

/*
 * Acquire the slot unless this backend holds it already (it is creating it).
 *
 * Another query of the source may hold it: while it decodes, and a worker
 * in a backlog between its batches too (table_fetch.c keeps its decoding
 * context).  PostgreSQL waits for a slot on a condition variable, which its
 * deadlock detector does not see: a holder whose next batch waits for a
 * lock this transaction holds (a user's alter_query of that query, then a
 * run_batch of another in the same transaction) and this wait would hang
 * both.  So the wait looks, every deadlock_timeout, whether the holder
 * waits for this backend (or for one that waits for it, and so on), and
 * fails as a deadlock if it does.
 */
bool
slot_acquire(const char *slot_name)
{
	if (MyReplicationSlot != NULL)
	{
		if (strcmp(NameStr(MyReplicationSlot->data.name), slot_name) == 0)
			return false;
		elog(ERROR, "streamwin: backend already holds replication slot \"%s\"",
			 NameStr(MyReplicationSlot->data.name));
	}
	for (;;)
	{
		ReplicationSlot *slot = find_slot(slot_name);
		int			holder;

		SpinLockAcquire(&slot->mutex);
		holder = slot->active_pid;
		SpinLockRelease(&slot->mutex);
		if (holder == 0 || holder == MyProcPid)
			break;
		if (waits_for_us(holder))
		{
			ConditionVariableCancelSleep();
			ereport(ERROR,
					(errcode(ERRCODE_T_R_DEADLOCK_DETECTED),
					 errmsg("deadlock detected"),
					 errdetail("The replication slot \"%s\" of the table source is held by process %d, "
							   "which waits for a lock this transaction holds, or for a process that waits for one.",
							   slot_name, holder),
					 errhint("Run the batch in a transaction that has not changed the source's other queries.")));
		}
		(void) ConditionVariableTimedSleep(&slot->active_cv, DeadlockTimeout,
										   WAIT_EVENT_REPLICATION_SLOT_DROP);
	}
	ConditionVariableCancelSleep();
	/* (one that took it meanwhile is waited for as PostgreSQL waits) */
	ReplicationSlotAcquire(slot_name, false);
	return true;
}

/* Move the slot's confirmed position forward (never back) to lsn. */
void
slot_confirm(XLogRecPtr lsn)
{
	if (XLogRecPtrIsInvalid(lsn) || lsn <= MyReplicationSlot->data.confirmed_flush)
		return;
	LogicalConfirmReceivedLocation(lsn);
	ReplicationSlotMarkDirty();
}

/*
 * source_slots_reap
 *		Drop this database's streamwin slots that no source owns: left by a
 *		DROP EXTENSION (which cannot drop slots), or by a drop_source whose
 *		transaction failed after its pre-commit.  known: the slot names of
 *		the sources (NULL: the extension is not installed).  Called by the
 *		launcher's starter, in a transaction that has read them under
 *		source_slots_lock().
 */
void
source_slots_reap(List *known)
{
	List	   *volatile orphans = NIL;
	char		prefix[NAMEDATALEN];
	ListCell   *lc;
	MemoryContext cxt = CurrentMemoryContext;
	ResourceOwner owner = CurrentResourceOwner;

	snprintf(prefix, sizeof(prefix), "streamwin_%u_", MyDatabaseId);
	LWLockAcquire(ReplicationSlotControlLock, LW_SHARED);
	for (int i = 0; i < max_replication_slots; i++)
	{
		ReplicationSlot *slot = &ReplicationSlotCtl->replication_slots[i];
		bool		candidate;

		if (!slot->in_use)
			continue;
		SpinLockAcquire(&slot->mutex);
		candidate = slot->data.database == MyDatabaseId &&
			slot->data.persistency == RS_PERSISTENT &&
			slot->active_pid == 0 &&
			strcmp(NameStr(slot->data.plugin), "streamwin") == 0 &&
			strncmp(NameStr(slot->data.name), prefix, strlen(prefix)) == 0;
		SpinLockRelease(&slot->mutex);
		if (candidate)
			orphans = lappend(orphans, pstrdup(NameStr(slot->data.name)));
	}
	LWLockRelease(ReplicationSlotControlLock);

	foreach(lc, orphans)
	{
		char	   *name = lfirst(lc);
		bool		owned = false;
		ListCell   *k;

		foreach(k, known)
		{
			if (strcmp(lfirst(k), name) == 0)
				owned = true;
		}
		if (owned)
			continue;
		/* in a subtransaction: a slot in use again is for the next round */
		BeginInternalSubTransaction(NULL);
		MemoryContextSwitchTo(cxt);
		PG_TRY();
		{
			ReplicationSlotDrop(name, true);
			ReleaseCurrentSubTransaction();
			ereport(LOG,
					(errmsg("streamwin: dropped replication slot \"%s\", which no table source owns", name)));
		}
		PG_CATCH();
		{
			MemoryContextSwitchTo(cxt);
			EmitErrorReport();
			FlushErrorState();
			if (MyReplicationSlot != NULL)
				ReplicationSlotRelease();
			RollbackAndReleaseCurrentSubTransaction();
		}
		PG_END_TRY();
		MemoryContextSwitchTo(cxt);
		CurrentResourceOwner = owner;
	}
}

/* --- WAL retained ---------------------------------------------------------- */

/* How often, at most, a source over streamwin.retained_wal_warning is warned about. */
#define RETAINED_WAL_WARNING_EVERY "5 minutes"

/* One table source, as source_slots_check_retention reads it. */
typedef struct RetentionCheck
{
	int32		source_id;
	char	   *name;
	char	   *slot_name;
	bool		warned;			/* over the threshold at the last check */
	bool		warned_recently;	/* ... and warned about lately */
	XLogRecPtr	restart_lsn;	/* the oldest WAL its slot keeps */
	uint64		retained;		/* bytes of WAL from there */
} RetentionCheck;

/*
 * Warn about one source over the threshold, in a subtransaction: record
 * when (the rate limit), put the warning in the last_error of its queries
 * that are not failing (a failure says more), then log it.
 */
static void
warn_retention(void *arg)
{
	RetentionCheck *c = arg;
	char	   *query;
	char	   *state;
	bool		has_pos;
	XLogRecPtr	pos;
	const char *setting = GetConfigOptionByName("streamwin.retained_wal_warning", NULL, false);
	const char *keep = GetConfigOptionByName("max_slot_wal_keep_size", NULL, false);
	char	   *size;
	StringInfoData message;
	StringInfoData detail;
	StringInfoData hint;
	StringInfoData recorded;

	size = text_to_cstring(DatumGetTextPP(DirectFunctionCall1(pg_size_pretty,
															  Int64GetDatum((int64) c->retained))));
	initStringInfo(&message);
	appendStringInfo(&message, "table source \"%s\" retains %s of WAL, more than streamwin.retained_wal_warning (%s)",
					 c->name, size, setting);
	initStringInfo(&detail);
	appendStringInfo(&detail, "Its replication slot \"%s\" keeps the WAL from %X/%X on",
					 c->slot_name, LSN_FORMAT_ARGS(c->restart_lsn));
	initStringInfo(&hint);
	appendStringInfoString(&hint, "Start, catch up or drop the queries that lag behind; a transaction left open holds the slot back too.");
	if (strcmp(keep, "-1") == 0)
		appendStringInfoString(&hint, " Nothing limits the WAL a slot retains while max_slot_wal_keep_size is -1.");
	else
		appendStringInfo(&hint, " Past max_slot_wal_keep_size (%s) PostgreSQL invalidates the slot, and its queries lose the changes they have not read.", keep);

	if (!catalog_source_wal_warned(c->source_id, true))
		return;					/* dropped meanwhile */
	if (catalog_source_furthest_behind(c->source_id, &query, &state, &has_pos, &pos))
		appendStringInfo(&detail, "; the query furthest behind is \"%s\" (%s), at %X/%X.",
						 query, state, LSN_FORMAT_ARGS(has_pos ? pos : InvalidXLogRecPtr));
	else
		appendStringInfoString(&detail, ", and no query reads the source.");

	/* as worker.c records a failure, with the level in front */
	initStringInfo(&recorded);
	appendStringInfo(&recorded, "WARNING: %s\nDETAIL: %s\nHINT: %s", message.data, detail.data, hint.data);
	catalog_source_queries_warned(c->source_id, recorded.data);

	ereport(WARNING,
			(errmsg_internal("%s", message.data),
			 errdetail_internal("%s", detail.data),
			 errhint("%s", hint.data)));
}

/* Back under the threshold: the next time over is warned about at once. */
static void
forget_warning(void *arg)
{
	RetentionCheck *c = arg;

	(void) catalog_source_wal_warned(c->source_id, false);
}

/*
 * The table sources of this database (*(List **) arg), in the caller's
 * memory context; none while the catalog is not at the library's version
 * (ALTER EXTENSION UPDATE not run yet: its queries say so).
 */
static void
retention_checks(void *arg)
{
	List	   *sources = NIL;
	ListCell   *lc;

	if (!catalog_version_is_current())
		return;
	foreach(lc, catalog_source_slot_rows(RETAINED_WAL_WARNING_EVERY))
	{
		SourceSlotRow *row = lfirst(lc);
		RetentionCheck *c = palloc0(sizeof(RetentionCheck));

		c->source_id = row->source_id;
		c->name = row->name;
		c->slot_name = row->slot_name;
		c->warned = row->warned;
		c->warned_recently = row->warned_recently;
		sources = lappend(sources, c);
	}
	*(List **) arg = sources;
}

void
source_slots_check_retention(void)
{
	uint64		threshold = (uint64) streamwin_retained_wal_warning * 1024 * 1024;
	List	   *sources = NIL;
	ListCell   *lc;
	int			level;
	ErrorData  *edata;

	if (streamwin_retained_wal_warning < 0 || wal_level < WAL_LEVEL_LOGICAL ||
		max_replication_slots == 0)
		return;

	/*
	 * A batch holds its query's catalog row only briefly, but run_available
	 * holds it for its caller's whole transaction: give up on a source (until
	 * the next round) rather than keep the starter waiting.
	 */
	level = NewGUCNestLevel();
	(void) set_config_option("lock_timeout", "1s", PGC_USERSET, PGC_S_SESSION,
							 GUC_ACTION_SAVE, true, 0, false);
	edata = run_in_subtransaction(retention_checks, &sources);
	if (edata != NULL)
		ereport(LOG,
				(errmsg("streamwin: could not check the WAL retained by table sources: %s",
						edata->message)));
	foreach(lc, sources)
	{
		RetentionCheck *c = lfirst(lc);
		ReplicationSlot *slot;
		XLogRecPtr	now = GetXLogInsertRecPtr();

		edata = NULL;

		/* an invalidated slot retains nothing (its queries fail loudly) */
		if (!slot_is_ours(c->slot_name) || source_slot_invalidated(c->slot_name))
			continue;
		slot = SearchNamedReplicationSlot(c->slot_name, true);
		SpinLockAcquire(&slot->mutex);
		c->restart_lsn = slot->data.restart_lsn;
		SpinLockRelease(&slot->mutex);
		c->retained = !XLogRecPtrIsInvalid(c->restart_lsn) && now > c->restart_lsn ?
			now - c->restart_lsn : 0;
		if (c->retained <= threshold)
		{
			if (c->warned)
				edata = run_in_subtransaction(forget_warning, c);
		}
		else if (!c->warned_recently)
			edata = run_in_subtransaction(warn_retention, c);
		if (edata != NULL)
			ereport(LOG,
					(errmsg("streamwin: could not check the WAL retained by table source \"%s\": %s",
							c->name, edata->message)));
	}
	AtEOXact_GUC(true, level);
}

/*
 * Taken by the reaper's caller before it reads the sources' slot names,
 * if no creator holds it: false if one does.  A creator holds it until its
 * transaction ends, which a session left idle in that transaction may put
 * off for good, and the starter that waited would hold up the launcher,
 * and every other database's starts with it.  The reaper tries again at
 * the next round.
 */
bool
source_slots_try_lock(void)
{
	return lock_slot_registry(ExclusiveLock, true);
}

/*
 * source_slot_in_use
 *		Does some backend hold the slot now?
 */
bool
source_slot_in_use(const char *slot_name)
{
	ReplicationSlot *slot = SearchNamedReplicationSlot(slot_name, true);
	int			pid = 0;

	if (slot != NULL)
	{
		SpinLockAcquire(&slot->mutex);
		pid = slot->active_pid;
		SpinLockRelease(&slot->mutex);
	}
	return pid != 0 && pid != MyProcPid;
}

/*
 * The lock that keeps a source's slot from being confirmed past the start
 * of a query being created.  A new query starts at the slot's confirmed
 * position ('earliest'), but until its creation commits, other queries'
 * batches cannot see it when they compute how far the slot may go.  So
 * create_query and reset_query hold this lock (shared) from reading the
 * position until they commit, and a batch confirms the slot only if it
 * gets the lock (exclusive, without waiting) before computing how far:
 * otherwise it leaves the slot where it is this time.
 */
static void
source_confirm_locktag(LOCKTAG *tag, int32 source_id)
{
	SET_LOCKTAG_ADVISORY(*tag, MyDatabaseId, STREAMWIN_LOCK_SPACE, (uint32) source_id, 4);
}

void
source_hold_start(int32 source_id)
{
	LOCKTAG		tag;

	source_confirm_locktag(&tag, source_id);
	(void) LockAcquire(&tag, ShareLock, false, false);
}

bool
source_confirm_begin(int32 source_id)
{
	LOCKTAG		tag;

	source_confirm_locktag(&tag, source_id);
	return LockAcquire(&tag, ExclusiveLock, false, true) != LOCKACQUIRE_NOT_AVAIL;
}

void
source_confirm_end(int32 source_id)
{
	LOCKTAG		tag;

	source_confirm_locktag(&tag, source_id);
	LockRelease(&tag, ExclusiveLock, false);
}
