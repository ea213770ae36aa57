/*-------------------------------------------------------------------------
 *
 * batch_memory.h
 *	  Keeping a batch's memory in the process for the next batch.
 *
 *-------------------------------------------------------------------------
 */
#ifndef STREAMWIN_BATCH_MEMORY_H
#define STREAMWIN_BATCH_MEMORY_H

/* streamwin.worker_keep_memory (MB): free memory kept for the next batch */
extern int	streamwin_worker_keep_memory;

extern void batch_memory_keep(void);
extern void batch_memory_release(void);

#endif
