/*-------------------------------------------------------------------------
 *
 * aggregate_state.h
 *	  Aggregates whose transition state streamwin keeps between batches
 *	  (see aggregate_state.c).
 *
 *-------------------------------------------------------------------------
 */
#ifndef STREAMWIN_AGGREGATE_STATE_H
#define STREAMWIN_AGGREGATE_STATE_H

/*
 * partial_state_supported
 *		Whether aggregate aggfnoid can be split into states merged batch by
 *		batch: as PostgreSQL requires for parallel aggregation, a combine
 *		function and (for an internal state) serialisation functions; not
 *		polymorphic or variadic, since the state table needs one column type.
 *		If not, *detail says why and *hint what to use instead.
 */
extern bool partial_state_supported(Oid aggfnoid, const char **detail, const char **hint);

#endif
