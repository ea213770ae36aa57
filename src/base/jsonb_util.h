/*-------------------------------------------------------------------------
 *
 * jsonb_util.h
 *	  Reading options given as a jsonb object (jsonb_util.c).
 *
 *-------------------------------------------------------------------------
 */
#ifndef STREAMWIN_JSONB_UTIL_H
#define STREAMWIN_JSONB_UTIL_H

#include "utils/jsonb.h"

/* The text of a top-level key of a jsonb object, or NULL if absent or null. */
extern char *jsonb_get_text(Jsonb *jb, const char *key);

/* The value of option name of an object of options, or NULL if absent or null. */
extern JsonbValue *option_value(Jsonb *options, const char *name);

/* Is an option's value a JSON object (else an array or a scalar)? */
#define OPTION_IS_OBJECT(v) ((v)->type == jbvBinary && JsonContainerIsObject((v)->val.binary.data))

/*
 * Refuse keys of a jsonb object that are not in `valid` (NULL-terminated),
 * naming the valid ones; `what` names the options in messages.
 */
extern void jsonb_check_keys(Jsonb *options, const char *const *valid, const char *what);

#endif							/* STREAMWIN_JSONB_UTIL_H */
