/*-------------------------------------------------------------------------
 *
 * datum_image.h
 *	  Whether two values of a type are the same bytes (datum_image.c).
 *
 *-------------------------------------------------------------------------
 */
#ifndef STREAMWIN_DATUM_IMAGE_H
#define STREAMWIN_DATUM_IMAGE_H

#include "access/tupdesc.h"

/*
 * datum_images_equal
 *		Are a and b, not NULL, the same image of attribute att's type,
 *		whatever their varlena headers (a value stored in a tuple has a
 *		short one, a decoded one not)?  Stricter than the type's equality:
 *		numeric 1.0 is not 1.00.
 */
extern bool datum_images_equal(Datum a, Datum b, Form_pg_attribute att);

#endif							/* STREAMWIN_DATUM_IMAGE_H */
