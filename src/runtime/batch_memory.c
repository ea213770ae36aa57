/*-------------------------------------------------------------------------
 *
 * batch_memory.c
 *	  Keeping a batch's memory in the process for the next batch.
 *
 * Every batch allocates about the same tens of megabytes again (the
 * messages, their rows, the executor's hash table and sort, the rows the
 * store hands over) and frees them at its end.  glibc gives memory back to
 * the kernel as soon as 128 kB are free at the top of the heap, and serves
 * each block above its mmap threshold with a fresh mmap, so that every
 * batch would page-fault its memory in anew.  A process that runs batch
 * after batch keeps up to streamwin.worker_keep_memory free for the next
 * one instead, and grows its heap by a quarter of that at a time:
 *
 *	- a query's worker, for its whole life (it is one loop over batches);
 *	- a session, for as long as run_available() or catch_up() runs its
 *	  batches; at their end it gives the memory back (batch_memory_release),
 *	  so that a session that ran a backlog does not keep what it used.
 *
 * Nowhere else: streamwin is preloaded into every backend, and other
 * backends keep the C library's own behaviour.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <malloc.h>

#include "batch_memory.h"

int			streamwin_worker_keep_memory = 64;

/* glibc's own values of the three parameters (mallopt(3)) */
#define GLIBC_DEFAULT_THRESHOLD (128 * 1024)

static bool kept = false;

void
batch_memory_keep(void)
{
	int			keep = streamwin_worker_keep_memory * 1024 * 1024;

	if (keep == 0 || kept)
		return;
	mallopt(M_MMAP_THRESHOLD, Min(keep / 2, 32 * 1024 * 1024));
	mallopt(M_TRIM_THRESHOLD, keep);
	mallopt(M_TOP_PAD, keep / 4);
	kept = true;
}

/*
 * Back to glibc's values, and the free memory back to the kernel.  glibc
 * no longer raises its mmap threshold by itself once it was set, so a large
 * block is mmapped from here on, as in a backend that never freed one.
 */
void
batch_memory_release(void)
{
	if (!kept)
		return;
	mallopt(M_MMAP_THRESHOLD, GLIBC_DEFAULT_THRESHOLD);
	mallopt(M_TRIM_THRESHOLD, GLIBC_DEFAULT_THRESHOLD);
	mallopt(M_TOP_PAD, GLIBC_DEFAULT_THRESHOLD);
	malloc_trim(0);
	kept = false;
}
