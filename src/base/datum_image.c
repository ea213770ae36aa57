/*-------------------------------------------------------------------------
 *
 * datum_image.c
 *	  Whether two values of a type are the same bytes: an upsert key's form
 *	  (store_upsert.c), a Debezium placeholder (changelog_input.c).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "fmgr.h"
#include "utils/datum.h"

#include "datum_image.h"

bool
datum_images_equal(Datum a, Datum b, Form_pg_attribute att)
{
	if (att->attlen == -1)
	{
		struct varlena *x = pg_detoast_datum_packed((struct varlena *) DatumGetPointer(a));
		struct varlena *y = pg_detoast_datum_packed((struct varlena *) DatumGetPointer(b));

		return VARSIZE_ANY_EXHDR(x) == VARSIZE_ANY_EXHDR(y) &&
			memcmp(VARDATA_ANY(x), VARDATA_ANY(y), VARSIZE_ANY_EXHDR(x)) == 0;
	}
	return datumIsEqual(a, b, att->attbyval, att->attlen);
}
