/*-------------------------------------------------------------------------
 *
 * operator.c
 *	  A query's chain of stateful operators, and the stages of a batch
 *	  called on each of them (see operator.h).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "operator.h"

void
operators_free(Operator *chain)
{
	while (chain != NULL)
	{
		Operator   *next = chain->next;

		chain->ops->free(chain);
		chain = next;
	}
}

void
operator_apply(Operator *op, BatchState *b, BatchInput *input, RowsFlow flow)
{
	/* an operator's rows are the batch's, or (from a join) unmatched ones */
	Assert(flow == FLOW_BATCH || b->query->join != NULL);
	if (op != NULL)
		op->ops->apply(op, b, input, flow);
}

void
operators_begin(Operator *chain, BatchState *b)
{
	for (Operator *op = chain; op != NULL; op = op->next)
		op->ops->begin(op, b);
}

void
operators_emit(Operator *chain, BatchState *b)
{
	for (Operator *op = chain; op != NULL; op = op->next)
		op->ops->emit(op, b);
}

int64
operators_state_rows(Operator *chain, BatchState *b)
{
	int64		n = 0;

	for (Operator *op = chain; op != NULL; op = op->next)
		n += op->ops->state_rows(op, b);
	return n;
}

void
operators_end(Operator *chain, TransactionId catalog_xmin)
{
	for (Operator *op = chain; op != NULL; op = op->next)
		op->ops->end(op, catalog_xmin);
}

void
operators_invalidate(Operator *chain)
{
	for (Operator *op = chain; op != NULL; op = op->next)
		op->ops->invalidate(op);
}

void
operators_sync(Operator *chain)
{
	for (Operator *op = chain; op != NULL; op = op->next)
		if (op->ops->sync != NULL)
			op->ops->sync(op);
}

void
operators_sync_for_checkpoint(Operator *chain, const Oid *unlogged, int n)
{
	for (Operator *op = chain; op != NULL; op = op->next)
	{
		bool		from_memory = false;

		if (op->ops->sync == NULL || op->ops->checkpoint_kept != NULL)
			continue;
		for (int i = 0; i < n && !from_memory; i++)
			from_memory = op->ops->writes_checkpoint(op, unlogged[i]);
		if (!from_memory)
			op->ops->sync(op);
	}
}

void
operators_checkpoint_kept(Operator *chain, Oid unlogged, Oid logged, int64 since_batch)
{
	for (Operator *op = chain; op != NULL; op = op->next)
		if (op->ops->checkpoint_kept != NULL)
			op->ops->checkpoint_kept(op, unlogged, logged, since_batch);
}

int64
operators_kept_bytes(Operator *chain, Oid unlogged)
{
	int64		bytes = 0;

	for (Operator *op = chain; op != NULL; op = op->next)
		if (op->ops->kept_bytes != NULL)
			bytes += op->ops->kept_bytes(op, unlogged);
	return bytes;
}

bool
operators_writes_checkpoint(Operator *chain, Oid unlogged)
{
	for (Operator *op = chain; op != NULL; op = op->next)
		if (op->ops->writes_checkpoint(op, unlogged))
			return true;
	return false;
}

bool
operators_checkpoint(Operator *chain, Oid unlogged)
{
	for (Operator *op = chain; op != NULL; op = op->next)
		if (op->ops->writes_checkpoint(op, unlogged))
		{
			op->ops->checkpoint(op, unlogged);
			return true;
		}
	return false;
}

bool
operators_defer_checkpoint(Operator *chain)
{
	for (Operator *op = chain; op != NULL; op = op->next)
		if (op->ops->defers_checkpoint != NULL && op->ops->defers_checkpoint(op))
			return true;
	return false;
}

int
batch_input_rows(BatchInput *input, int32 source_id)
{
	BatchInput *found = batch_input_find(input, source_id);

	return found != NULL ? found->nrows : 0;
}

BatchInput *
batch_input_find(BatchInput *input, int32 source_id)
{
	for (; input != NULL; input = input->next)
		if (input->source_id == source_id)
			return input;
	return NULL;
}
