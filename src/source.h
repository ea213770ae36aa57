/*-------------------------------------------------------------------------
 *
 * source.h
 *	  Sources as relations: the view behind each source and the rows of the
 *	  batch being processed.
 *
 *-------------------------------------------------------------------------
 */
#ifndef STREAMWIN_SOURCE_H
#define STREAMWIN_SOURCE_H

#include "access/htup.h"
#include "access/tupdesc.h"
#include "utils/jsonb.h"

#include "decode.h"

/*
 * The decoded rows of the batch this backend is processing for one source.
 * While set, the source's view returns these rows; otherwise it is empty.
 */
typedef struct BatchInput
{
	int32		source_id;
	int			ntuples;
	HeapTuple  *tuples;
} BatchInput;

extern void source_set_batch_input(BatchInput *input);
extern TupleDesc source_tupdesc(Oid relid);
extern void source_options_validate(Jsonb *options);

struct SourceInfo;
extern SourceMetadata *source_metadata_map(const struct SourceInfo *src, TupleDesc desc);

#endif
