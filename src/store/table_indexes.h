/*-------------------------------------------------------------------------
 *
 * table_indexes.h
 *	  The index entries of rows a store writes with the heap's own
 *	  functions (table_indexes.c).
 *
 * A store's tables run without indexes while the store holds their rows;
 * once a batch has run on a table without the store (a cold batch, or
 * table mode: op_store.h), its indexes stay, and the store that writes its
 * rows by location from then on adds their index entries too, so that the
 * next such batch finds them.  A table without indexes costs nothing.
 *
 *-------------------------------------------------------------------------
 */
#ifndef STREAMWIN_TABLE_INDEXES_H
#define STREAMWIN_TABLE_INDEXES_H

#include "executor/tuptable.h"
#include "utils/relcache.h"

typedef struct TableIndexes TableIndexes;

/* The indexes of rel (open while the caller writes it), or NULL: none. */
extern TableIndexes *table_indexes_open(Relation rel);

/*
 * The index entries of the row in slot, at slot->tts_tid.  A store holds
 * each row once: unique indexes are not checked.
 */
extern void table_indexes_insert(TableIndexes *ti, TupleTableSlot *slot);

extern void table_indexes_close(TableIndexes *ti);

#endif							/* STREAMWIN_TABLE_INDEXES_H */
