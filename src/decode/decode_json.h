/*-------------------------------------------------------------------------
 *
 * decode_json.h
 *	  The JSON message format (decode_json.c), for decode.c.
 *
 *-------------------------------------------------------------------------
 */
#ifndef STREAMWIN_DECODE_JSON_H
#define STREAMWIN_DECODE_JSON_H

#include "decode_value.h"

extern void decode_json_init(DecodeState *state);
extern const char *decode_json_message(DecodeState *state,
									   const char *payload, int len,
									   Datum *values, bool *nulls);

#endif							/* STREAMWIN_DECODE_JSON_H */
