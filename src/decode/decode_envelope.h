/*-------------------------------------------------------------------------
 *
 * decode_envelope.h
 *	  The parts of a Debezium change event (decode_envelope.c), for
 *	  decode.c.
 *
 *-------------------------------------------------------------------------
 */
#ifndef STREAMWIN_DECODE_ENVELOPE_H
#define STREAMWIN_DECODE_ENVELOPE_H

#include "decode_value.h"

extern const char *decode_debezium_event(DecodeState *state, const char *payload, int len,
										 char *op, DecodeSpan *before, DecodeSpan *after,
										 DecodeSpan *schema);

#endif							/* STREAMWIN_DECODE_ENVELOPE_H */
