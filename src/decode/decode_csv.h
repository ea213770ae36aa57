/*-------------------------------------------------------------------------
 *
 * decode_csv.h
 *	  The CSV message format (decode_csv.c), for decode.c.
 *
 *-------------------------------------------------------------------------
 */
#ifndef STREAMWIN_DECODE_CSV_H
#define STREAMWIN_DECODE_CSV_H

#include "decode_value.h"

extern const char *decode_csv_message(DecodeState *state,
									  const char *payload, int len,
									  Datum *values, bool *nulls);

#endif							/* STREAMWIN_DECODE_CSV_H */
