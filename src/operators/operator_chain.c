/*-------------------------------------------------------------------------
 *
 * operator_chain.c
 *	  Every kind of stateful operator, registered in the order rows flow
 *	  through a chain, and making a query's chain of them (see operator.h).
 *	  A new kind of operator is one file below this one and one line here.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "operator.h"

/*
 * Every kind of operator, in the order rows flow through a chain: each is
 * asked whether the query has one of its kind.  A query has one sink: an
 * aggregation over a state store, or the plain SQL path.
 */
static const OperatorMake operator_kinds[] = {
	upsert_operator_make,
	dedup_operator_make,
	join_operator_make,
	aggregate_operator_make,
	sql_operator_make,
};

Operator *
operators_make(struct QueryRunner *r)
{
	Operator   *head = NULL;
	Operator   *last = NULL;

	for (int i = 0; i < (int) lengthof(operator_kinds); i++)
	{
		Operator   *op = operator_kinds[i] (r);

		if (op == NULL)
			continue;
		Assert(op->ops != NULL && op->runner == r && op->next == NULL);
		if (last == NULL)
			head = op;
		else
			last->next = op;
		last = op;
	}
	return head;
}
