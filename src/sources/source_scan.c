/*-------------------------------------------------------------------------
 *
 * source_scan.c
 *	  The scans of rows streamwin holds in memory: custom scan nodes that
 *	  the planner puts in place of the function scans of
 *	  streamwin.source_rows() and streamwin.store_rows().
 *
 * A source is a view over streamwin.source_rows() (source.c), so that
 * queries over it are planned like queries over any table.  PostgreSQL runs
 * a set-returning function in FROM by materializing its result: every row
 * of the batch would be copied into a tuplestore and read back from it
 * before the query saw it, once per statement that reads the source.  The
 * batch's rows are already in memory (BatchInput), so this scan hands them
 * to the plan where they are.
 *
 * The planner hook offers the custom path for a function RTE that calls one
 * of the functions whose C body is streamwin_source_rows with constant
 * arguments, without ORDINALITY and without references to its whole row
 * (which the scan's target list could not provide), unless
 * streamwin.enable_source_scan is off; anything else keeps the function
 * scan, which returns the same rows.  The path keeps the row
 * estimate the planner made from the function's ROWS, so plans keep their
 * shape: only the cost of calling the function goes.
 *
 * The scan finds its rows (the BatchInput of its source) when it first
 * runs, as the function does when it is called, and reads them again from
 * the start on a rescan.  A batch's rows are values already (BatchRow), so
 * each is copied into the scan's virtual slot as it is (PostgreSQL 15's
 * custom scans have virtual scan slots); values passed by reference point
 * into the batch's memory.
 *
 * The result statements of a state store read its groups through
 * streamwin.store_rows(query_id, which) (store_rows.c) with constant
 * arguments too; its scan reads the groups where they are, in the order
 * the store gives them, through a StoreRowsScan.
 *
 * src/sources/source_scan.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/htup_details.h"
#include "access/sysattr.h"
#include "catalog/pg_language.h"
#include "catalog/pg_proc.h"
#include "catalog/pg_type.h"
#include "commands/explain.h"
#include "executor/executor.h"
#include "nodes/extensible.h"
#include "nodes/makefuncs.h"
#include "nodes/nodeFuncs.h"
#include "optimizer/optimizer.h"
#include "optimizer/pathnode.h"
#include "optimizer/paths.h"
#include "optimizer/restrictinfo.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/syscache.h"

#include "source.h"
#include "state_store.h"

#define SOURCE_ROWS_SYMBOL "streamwin_source_rows"
#define STORE_ROWS_SYMBOL "streamwin_store_rows"

/* Which rows a function call returns, by its C body. */
typedef enum RowsKind
{
	ROWS_NONE,
	ROWS_SOURCE,				/* streamwin_source_rows(id [, numbered]) */
	ROWS_STORE,					/* streamwin_store_rows(query_id, which) */
} RowsKind;

typedef struct SourceScanState
{
	CustomScanState css;
	int32		source_id;
	bool		numbered;		/* a position column comes first */
	bool		started;		/* input has been looked up */
	uint64		generation;		/* batch_scope_generation() then */
	BatchInput *input;			/* NULL: no rows for this source */
	int			next;			/* index of the next row of input */
} SourceScanState;

typedef struct StoreScanState
{
	CustomScanState css;
	int32		query_id;
	char	   *which;
	uint64		generation;		/* batch_scope_generation() at its start */
	StoreRowsScan *scan;		/* NULL until the scan first runs */
} StoreScanState;

/*
 * A scan reads a batch's rows, or a store's groups, where they lie, as long
 * as the statement that began it runs.  A cursor over a source's view that
 * the query's own code opened in one statement (a function of the query)
 * and fetches from in another, or after the batch, would read what is gone
 * by then: refused.  (The function a scan replaces copies the rows when it
 * begins, and goes on giving that copy.)
 */
static void
check_same_statement(uint64 generation)
{
	if (batch_scope_generation() != generation)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("a batch's rows can be read only by the statement that began reading them"),
				 errdetail("A cursor over a source's view, or over streamwin.store_rows(), was read after its statement or its batch ended."),
				 errhint("Read the rows within the statement, or copy them into a table of your own.")));
}

/* streamwin.enable_source_scan: off leaves every source to the function */
bool		streamwin_enable_source_scan = true;

static set_rel_pathlist_hook_type prev_set_rel_pathlist_hook = NULL;

static void source_scan_paths(PlannerInfo *root, RelOptInfo *rel, Index rti,
							  RangeTblEntry *rte);
static Plan *source_scan_plan(PlannerInfo *root, RelOptInfo *rel,
							  CustomPath *best_path, List *tlist,
							  List *clauses, List *custom_plans);
static Node *source_scan_create_state(CustomScan *cscan);
static void source_scan_begin(CustomScanState *node, EState *estate, int eflags);
static TupleTableSlot *source_scan_exec(CustomScanState *node);
static void source_scan_end(CustomScanState *node);
static void source_scan_rescan(CustomScanState *node);
static void source_scan_explain(CustomScanState *node, List *ancestors,
								ExplainState *es);
static Node *store_scan_create_state(CustomScan *cscan);
static TupleTableSlot *store_scan_exec(CustomScanState *node);
static void store_scan_end(CustomScanState *node);
static void store_scan_rescan(CustomScanState *node);
static void store_scan_explain(CustomScanState *node, List *ancestors,
							   ExplainState *es);

static const CustomPathMethods source_path_methods = {
	.CustomName = "StreamwinSourceRows",
	.PlanCustomPath = source_scan_plan,
};

static const CustomScanMethods source_plan_methods = {
	.CustomName = "StreamwinSourceRows",
	.CreateCustomScanState = source_scan_create_state,
};

static const CustomExecMethods source_exec_methods = {
	.CustomName = "StreamwinSourceRows",
	.BeginCustomScan = source_scan_begin,
	.ExecCustomScan = source_scan_exec,
	.EndCustomScan = source_scan_end,
	.ReScanCustomScan = source_scan_rescan,
	.ExplainCustomScan = source_scan_explain,
};

static const CustomPathMethods store_path_methods = {
	.CustomName = "StreamwinStoreRows",
	.PlanCustomPath = source_scan_plan,
};

static const CustomScanMethods store_plan_methods = {
	.CustomName = "StreamwinStoreRows",
	.CreateCustomScanState = store_scan_create_state,
};

static const CustomExecMethods store_exec_methods = {
	.CustomName = "StreamwinStoreRows",
	.BeginCustomScan = source_scan_begin,
	.ExecCustomScan = store_scan_exec,
	.EndCustomScan = store_scan_end,
	.ReScanCustomScan = store_scan_rescan,
	.ExplainCustomScan = store_scan_explain,
};

/*
 * source_scan_init
 *		Install the planner hook; from _PG_init.
 */
void
source_scan_init(void)
{
	RegisterCustomScanMethods(&source_plan_methods);
	RegisterCustomScanMethods(&store_plan_methods);
	prev_set_rel_pathlist_hook = set_rel_pathlist_hook;
	set_rel_pathlist_hook = source_scan_paths;
}

/* The rows funcid returns, if it is a C function of one of those bodies */
static RowsKind
rows_function_kind(Oid funcid)
{
	HeapTuple	tup;
	RowsKind	kind = ROWS_NONE;

	tup = SearchSysCache1(PROCOID, ObjectIdGetDatum(funcid));
	if (!HeapTupleIsValid(tup))
		return ROWS_NONE;
	if (((Form_pg_proc) GETSTRUCT(tup))->prolang == ClanguageId)
	{
		bool		isnull;
		Datum		prosrc = SysCacheGetAttr(PROCOID, tup, Anum_pg_proc_prosrc,
											 &isnull);

		if (!isnull)
		{
			char	   *symbol = TextDatumGetCString(prosrc);

			if (strcmp(symbol, SOURCE_ROWS_SYMBOL) == 0)
				kind = ROWS_SOURCE;
			else if (strcmp(symbol, STORE_ROWS_SYMBOL) == 0)
				kind = ROWS_STORE;
		}
	}
	ReleaseSysCache(tup);
	return kind;
}

/* Are args constants of the types of the functions of that kind? */
static bool
constant_arguments(RowsKind kind, List *args)
{
	static const Oid source_args[] = {INT4OID, BOOLOID};
	static const Oid store_args[] = {INT4OID, TEXTOID};
	const Oid  *types = kind == ROWS_SOURCE ? source_args : store_args;
	ListCell   *lc;

	/* source_rows(source_id integer [, numbered boolean]), store_rows(integer, text) */
	if (list_length(args) < (kind == ROWS_SOURCE ? 1 : 2) || list_length(args) > 2)
		return false;
	foreach(lc, args)
	{
		Node	   *arg = lfirst(lc);

		if (!IsA(arg, Const) || ((Const *) arg)->constisnull ||
			((Const *) arg)->consttype != types[foreach_current_index(lc)])
			return false;
	}
	return true;
}

/*
 * The call of streamwin.source_rows() or store_rows() a function RTE scans
 * (with its column definitions), if a scan can replace its function scan:
 * a single such call with non-null constant arguments, no ORDINALITY, no
 * LATERAL references, and no whole-row reference to its result in the
 * rel's outputs or quals.  *kind says which.
 */
static RangeTblFunction *
replaceable_call(RelOptInfo *rel, Index rti, RangeTblEntry *rte, RowsKind *kind)
{
	RangeTblFunction *rtfunc;
	FuncExpr   *call;
	Bitmapset  *attrs = NULL;
	ListCell   *lc;

	if (rte->rtekind != RTE_FUNCTION || list_length(rte->functions) != 1 ||
		rte->funcordinality || !bms_is_empty(rel->lateral_relids))
		return NULL;
	rtfunc = linitial_node(RangeTblFunction, rte->functions);
	if (!IsA(rtfunc->funcexpr, FuncExpr))
		return NULL;
	call = (FuncExpr *) rtfunc->funcexpr;
	/* cheap checks first: the catalog is looked up only for calls like ours */
	if (list_length(call->args) < 1 || list_length(call->args) > 2 ||
		!IsA(linitial(call->args), Const))
		return NULL;
	*kind = rows_function_kind(call->funcid);
	if (*kind == ROWS_NONE || !constant_arguments(*kind, call->args))
		return NULL;

	pull_varattnos((Node *) rel->reltarget->exprs, rti, &attrs);
	foreach(lc, rel->baserestrictinfo)
		pull_varattnos((Node *) lfirst_node(RestrictInfo, lc)->clause, rti, &attrs);
	if (bms_is_member(InvalidAttrNumber - FirstLowInvalidHeapAttributeNumber, attrs))
		return NULL;
	return rtfunc;
}

static void
source_scan_paths(PlannerInfo *root, RelOptInfo *rel, Index rti,
				  RangeTblEntry *rte)
{
	RangeTblFunction *call;
	RowsKind	kind;
	Path	   *function_path;
	CustomPath *path;

	if (prev_set_rel_pathlist_hook)
		prev_set_rel_pathlist_hook(root, rel, rti, rte);

	if (!streamwin_enable_source_scan)
		return;
	call = replaceable_call(rel, rti, rte, &kind);
	if (call == NULL || list_length(rel->pathlist) != 1)
		return;
	function_path = linitial(rel->pathlist);
	if (function_path->pathtype != T_FunctionScan || function_path->param_info != NULL)
		return;

	path = makeNode(CustomPath);
	path->path.pathtype = T_CustomScan;
	path->path.parent = rel;
	path->path.pathtarget = rel->reltarget;
	path->path.param_info = NULL;
	path->path.parallel_aware = false;
	path->path.parallel_safe = false;
	path->path.parallel_workers = 0;
	path->path.rows = function_path->rows;

	/* The function scan's cost without the call, which is its startup cost */
	path->path.startup_cost = 0;
	path->path.total_cost = function_path->total_cost - function_path->startup_cost;
	path->path.pathkeys = NIL;
	path->flags = 0;
	path->custom_paths = NIL;
	path->custom_private = list_make1(call);
	path->methods = kind == ROWS_SOURCE ? &source_path_methods : &store_path_methods;

	/* the only other path is the function scan: the same rows, dearer */
	rel->pathlist = NIL;
	add_path(rel, &path->path);
}

static Plan *
source_scan_plan(PlannerInfo *root, RelOptInfo *rel, CustomPath *best_path,
				 List *tlist, List *clauses, List *custom_plans)
{
	RangeTblFunction *rtfunc = linitial_node(RangeTblFunction, best_path->custom_private);
	CustomScan *cscan = makeNode(CustomScan);
	List	   *scan_tlist = NIL;
	ListCell   *type,
			   *typmod,
			   *collation;
	AttrNumber	attno = 0;

	/*
	 * The scan tuple holds every column the function returns, in order, as
	 * the function's own Vars; setrefs.c turns the plan's references to them
	 * into references to this list.  There is no relation to scan (scanrelid
	 * 0), as for a join pushed down to a foreign server.
	 */
	forthree(type, rtfunc->funccoltypes, typmod, rtfunc->funccoltypmods,
			 collation, rtfunc->funccolcollations)
	{
		Var		   *var;

		attno++;
		var = makeVar(rel->relid, attno, lfirst_oid(type), lfirst_int(typmod),
					  lfirst_oid(collation), 0);
		scan_tlist = lappend(scan_tlist, makeTargetEntry((Expr *) var, attno, NULL, false));
	}

	cscan->scan.plan.targetlist = tlist;
	cscan->scan.plan.qual = extract_actual_clauses(clauses, false);
	cscan->scan.scanrelid = 0;
	cscan->flags = best_path->flags;
	cscan->custom_plans = NIL;
	cscan->custom_exprs = copyObject(((FuncExpr *) rtfunc->funcexpr)->args);
	cscan->custom_private = NIL;
	cscan->custom_scan_tlist = scan_tlist;
	cscan->methods = best_path->methods == &source_path_methods ? &source_plan_methods :
		&store_plan_methods;
	return &cscan->scan.plan;
}

static Node *
source_scan_create_state(CustomScan *cscan)
{
	SourceScanState *state = palloc0(sizeof(SourceScanState));
	Const	   *id = linitial_node(Const, cscan->custom_exprs);

	NodeSetTag(state, T_CustomScanState);
	state->css.methods = &source_exec_methods;
	state->source_id = DatumGetInt32(id->constvalue);
	state->numbered = list_length(cscan->custom_exprs) > 1 &&
		DatumGetBool(lsecond_node(Const, cscan->custom_exprs)->constvalue);
	return (Node *) state;
}

/* Nothing to set up: the rows are found when the scan first runs */
static void
source_scan_begin(CustomScanState *node, EState *estate, int eflags)
{
}

/* Read the rows from the first again. */
static void
source_scan_restart(SourceScanState *state)
{
	state->next = 0;
	if (state->input != NULL && state->input->refill != NULL)
		(void) state->input->refill(state->input, true);
}

/* The next row of the batch in the scan slot, or NULL after the last */
static TupleTableSlot *
source_scan_next(ScanState *ss)
{
	SourceScanState *state = (SourceScanState *) ss;
	TupleTableSlot *slot = ss->ss_ScanTupleSlot;
	int			first = state->numbered ? 1 : 0;
	BatchInput *input;
	BatchRow	row;

	if (!state->started)
	{
		input = batch_scope_input(state->source_id);
		if (input != NULL)
			batch_rows_check_type(input->desc, slot->tts_tupleDescriptor,
								  first ? INT4OID : InvalidOid,
								  psprintf("source %d", state->source_id));
		state->input = input;
		state->started = true;
		state->generation = batch_scope_generation();
		/* only a join's pairs are made in chunks, and none is numbered */
		Assert(!state->numbered || input == NULL || input->refill == NULL);
		source_scan_restart(state);
	}
	else
		check_same_statement(state->generation);
	input = state->input;
	ExecClearTuple(slot);
	if (input == NULL)
		return slot;
	while (state->next >= input->nrows)
	{
		/* the next chunk of rows made as they are read (BatchInput.refill) */
		if (input->refill == NULL || !input->refill(input, false))
			return slot;
		state->next = 0;
	}

	row = input->rows[state->next];
	if (state->numbered)
	{
		slot->tts_values[0] = Int32GetDatum(state->next);
		slot->tts_isnull[0] = false;
	}
	memcpy(slot->tts_values + first, row, input->natts * sizeof(Datum));
	memcpy(slot->tts_isnull + first, BATCH_ROW_NULLS(row, input->natts),
		   input->natts * sizeof(bool));
	state->next++;
	return ExecStoreVirtualTuple(slot);
}

/* Rows come from memory as they are: nothing to recheck */
static bool
source_scan_recheck(ScanState *ss, TupleTableSlot *slot)
{
	return true;
}

static TupleTableSlot *
source_scan_exec(CustomScanState *node)
{
	return ExecScan(&node->ss, source_scan_next, source_scan_recheck);
}

static void
source_scan_end(CustomScanState *node)
{
	ExecClearTuple(node->ss.ss_ScanTupleSlot);
}

static void
source_scan_rescan(CustomScanState *node)
{
	SourceScanState *state = (SourceScanState *) node;

	if (state->started)
	{
		check_same_statement(state->generation);
		source_scan_restart(state);
	}
	ExecScanReScan(&node->ss);
}

static void
source_scan_explain(CustomScanState *node, List *ancestors, ExplainState *es)
{
	SourceScanState *state = (SourceScanState *) node;

	ExplainPropertyInteger("Source", NULL, state->source_id, es);
	if (state->numbered)
		ExplainPropertyBool("Numbered", true, es);
}

/* --- the scan of store_rows() ----------------------------------------- */

static Node *
store_scan_create_state(CustomScan *cscan)
{
	StoreScanState *state = palloc0(sizeof(StoreScanState));

	NodeSetTag(state, T_CustomScanState);
	state->css.methods = &store_exec_methods;
	state->query_id = DatumGetInt32(linitial_node(Const, cscan->custom_exprs)->constvalue);
	state->which = TextDatumGetCString(lsecond_node(Const, cscan->custom_exprs)->constvalue);
	return (Node *) state;
}

/* The next group's row in the scan slot, or an empty slot after the last */
static TupleTableSlot *
store_scan_next(ScanState *ss)
{
	StoreScanState *state = (StoreScanState *) ss;
	TupleTableSlot *slot = ss->ss_ScanTupleSlot;

	if (state->scan == NULL)
	{
		state->scan = store_rows_scan_begin(state->query_id, state->which,
											slot->tts_tupleDescriptor);
		state->generation = batch_scope_generation();
	}
	else
		check_same_statement(state->generation);
	ExecClearTuple(slot);
	if (!store_rows_scan_next(state->scan, slot->tts_values, slot->tts_isnull))
		return slot;
	return ExecStoreVirtualTuple(slot);
}

static TupleTableSlot *
store_scan_exec(CustomScanState *node)
{
	return ExecScan(&node->ss, store_scan_next, source_scan_recheck);
}

static void
store_scan_end(CustomScanState *node)
{
	StoreScanState *state = (StoreScanState *) node;

	ExecClearTuple(node->ss.ss_ScanTupleSlot);
	if (state->scan != NULL)
		store_rows_scan_end(state->scan);
	state->scan = NULL;
}

static void
store_scan_rescan(CustomScanState *node)
{
	StoreScanState *state = (StoreScanState *) node;

	if (state->scan != NULL)
	{
		check_same_statement(state->generation);
		store_rows_scan_restart(state->scan);
	}
	ExecScanReScan(&node->ss);
}

static void
store_scan_explain(CustomScanState *node, List *ancestors, ExplainState *es)
{
	StoreScanState *state = (StoreScanState *) node;

	ExplainPropertyInteger("Query", NULL, state->query_id, es);
	ExplainPropertyText("Groups", state->which, es);
}
