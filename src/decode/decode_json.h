/*-------------------------------------------------------------------------
 *
 * decode_json.h
 *	  The JSON message format (decode_json.c), for decode.c, and the members
 *	  of an object for the envelopes (decode_envelope.c).
 *
 *-------------------------------------------------------------------------
 */
#ifndef STREAMWIN_DECODE_JSON_H
#define STREAMWIN_DECODE_JSON_H

#include "decode_value.h"

extern const char decode_json_wrapped[];

extern void decode_json_init(DecodeState *state);
extern const char *decode_json_message(DecodeState *state,
									   const char *payload, int len,
									   Datum *values, bool *nulls);
extern const char *decode_json_members(DecodeState *state, const char *payload, int len,
									   int nnames, const char *const *names,
									   DecodeSpan *spans);
extern char *decode_json_string(DecodeState *state, const DecodeSpan *span);
extern int	decode_json_elements(DecodeState *state, const DecodeSpan *array,
								 DecodeSpan **elements);
extern const char *decode_json_kind_name(uint8 kind);

#endif							/* STREAMWIN_DECODE_JSON_H */
