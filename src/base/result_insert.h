/*-------------------------------------------------------------------------
 *
 * result_insert.h
 *	  Rows new to a result table, written with the table AM's multi-insert
 *	  (see result_insert.c).
 *
 *-------------------------------------------------------------------------
 */
#ifndef STREAMWIN_RESULT_INSERT_H
#define STREAMWIN_RESULT_INSERT_H

#include "executor/spi.h"
#include "tcop/dest.h"
#include "utils/relcache.h"

/*
 * result_insert_possible
 *		May the rows of plan (a SELECT whose columns are named as the result
 *		table's) be written into relid by result_insert_receiver() with the
 *		same effect as INSERT INTO relid SELECT ...?  False for a table with
 *		anything an INSERT would run on its behalf that the receiver does
 *		not: triggers, rules, row security, defaults or generated columns
 *		the SELECT leaves out, deferrable constraints, partitions.
 *		Must be called inside a transaction.
 */
extern bool result_insert_possible(Oid relid, SPIPlanPtr plan);

/*
 * result_insert_plain
 *		Would INSERT INTO rel (the columns of desc, by name) SELECT ... do
 *		anything for a row but store it, check its constraints and insert
 *		its index entries?  (result_insert_possible, for rows that are not
 *		a plan's.)
 */
extern bool result_insert_plain(Relation rel, TupleDesc desc);

/*
 * result_insert_receiver
 *		A receiver that inserts the rows it gets into relid, checked and
 *		indexed as an INSERT would (privileges, NOT NULL and CHECK
 *		constraints, unique and exclusion constraints), many to a page.
 *		The rows are visible to the statements run after it is destroyed.
 */
extern DestReceiver *result_insert_receiver(Oid relid);

/*
 * result_insert_receiver_as
 *		The same, writing the rows and their index entries as role (in a
 *		security-restricted operation): into a table role owns, whose
 *		indexes may run role's functions.
 */
extern DestReceiver *result_insert_receiver_as(Oid relid, Oid role);

#endif							/* STREAMWIN_RESULT_INSERT_H */
