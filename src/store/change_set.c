/*-------------------------------------------------------------------------
 *
 * change_set.c
 *	  Counted values: what min, max and DISTINCT aggregates keep per open
 *	  group over a changelog source, so that a retracted row takes back
 *	  exactly its value.
 *
 * Over an append stream, min(x) keeps one value and a DISTINCT aggregate
 * the set of values seen (distinct_set.c): a value only ever arrives.  Over
 * a changelog a value may also leave (the row that held it is updated or
 * deleted), and the minimum must then fall back to the next value, which
 * only the count of each value can tell.  So such a partial is a change
 * set: each distinct non-NULL value with the number of rows that hold it,
 * ascending by the value type's default ordering in the aggregate's
 * collation, values whose count is 0 left out.  Values the type calls
 * equal but that differ (numeric 1.5 and 1.50) are counted apart, each
 * form by its image (image_order): a retraction takes back the form its
 * row held.
 *
 *	streamwin.change_set(x anyelement, change smallint): the aggregate of a
 *		batch's rows (change: +1 added, -1 retracted) into a set;
 *	streamwin.change_set_merge(a bytea, b bytea): two sets' counts added,
 *		which the state store merges a batch's set into the group's with;
 *	streamwin.change_set_min(set, NULL::type), _max, and
 *	streamwin.change_set_values(set, NULL::type): the final values (an
 *		array of the values, for a DISTINCT aggregate to run over).
 *
 * A set is bytea.  A group's set holds every value of the group's rows
 * (about a thousand in a group of a few thousand rows), and the store
 * merges a batch's set into it after every batch that changes the group,
 * rewrites the group's state row with it, then answers min and max from
 * it: so a set is laid out to be merged and read where it lies, without
 * receiving or sending a value, and to take few bytes.  Version 2
 * (SetHeader): the element type, collation and number of values, then
 * each value's entry, ascending: its count (a zigzag varint: 1 byte for a
 * count under 64), then the value's image as a tuple stores it (a varlena
 * with a 1-byte header where it fits, never compressed or out of line; a
 * by-value type's typlen bytes), unaligned, as in a tuple.  A numeric of a
 * few digits takes about 8 bytes.  A merge is one pass over both sets that
 * copies entries whole where their count stays; to compare two values, a
 * numeric's image is read where it lies (numeric_image_read), any other
 * type's value is copied into an aligned buffer first (entry_datum), a
 * 4-byte header in place of its short one.  min is the first entry, max
 * the last (its offset is in the header).  The images are this machine's:
 * a set carries the byte order it was written in, and one of the other is
 * refused (reset_query rebuilds the state from the source).
 *
 * The images are trusted only where no image can do harm: the functions
 * are SQL-callable, so a set may be any bytea a role hands them, naming any
 * type.  Built-in by-value and fixed-length types and enums (any bits are
 * a value, or an error), text-like types and bytea (any bytes; text is
 * checked against the database encoding before it goes out) and numeric
 * (its header and digits checked when an entry is read) keep their
 * images.  Every other type, a container (array, range, jsonb, record) or
 * one defined by an extension, whose functions trust their input's
 * layout, keeps its values in its binary send format instead, received
 * (and so checked) wherever a value is compared or read.
 *
 * Version 1, each value's count and its binary send format, is what
 * queries wrote before version 2: their state and checkpoint rows are read
 * still (converted on reading), and what they merge into is written anew
 * as version 2.
 *
 * Version 3 is version 2 with each form of an equal value apart (see
 * image_order); in version 2, which queries wrote before, an entry counts
 * every form of its value under the image of the first.  A group's set of
 * version 2 stays one: what merges into it is counted by value alone (a
 * retraction of 1.50 takes back from the 1.5 that counts it), as when it
 * was written; reset_query starts such a query's groups as version 3.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "common/int.h"

#include "access/transam.h"
#include "access/tupmacs.h"
#include "catalog/pg_type.h"
#include "fmgr.h"
#include "libpq/pqformat.h"
#include "port/pg_bswap.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/datum.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/sortsupport.h"
#include "utils/typcache.h"

#include "sql_function.h"

STREAMWIN_SQL_FUNCTION(streamwin_change_set_accum);
STREAMWIN_SQL_FUNCTION(streamwin_change_set_final);
STREAMWIN_SQL_FUNCTION(streamwin_change_set_merge);
STREAMWIN_SQL_FUNCTION(streamwin_change_set_min);
STREAMWIN_SQL_FUNCTION(streamwin_change_set_max);
STREAMWIN_SQL_FUNCTION(streamwin_change_set_values);
STREAMWIN_SQL_FUNCTION(streamwin_change_set_rows);

/* The first 4 bytes after the varlena header, in network order in both */
#define CHANGE_SET_V1 1
#define CHANGE_SET_V2 2
#define CHANGE_SET_V3 3

/*
 * The byte order of a version 2 set's images (and of its header): written
 * natively, so that the other byte order reads another number.
 */
#define SET_ARCH ((uint32) 0x53570102)

/* A version 2 set's header; its entries follow, the first at sizeof. */
typedef struct SetHeader
{
	int32		vl_len_;
	uint32		version;		/* CHANGE_SET_V2 or _V3, in network order */
	uint32		arch;			/* SET_ARCH */
	Oid			typid;
	Oid			collid;
	int32		n;				/* entries */
	uint32		last;			/* the last entry's offset; 0: none */
} SetHeader;

/* An entry of a version 2 set, as read (entry_read). */
typedef struct SetEntry
{
	Size		off;			/* where it starts in its set */
	Size		len;			/* its bytes */
	int64		count;
	const char *img;			/* its value's image */
	Size		img_len;
} SetEntry;

/*
 * How a type's values are laid out in a version 2 set: see the header
 * comment for why.
 */
typedef enum ImageKind
{
	IMAGE_RAW,					/* any bytes are a value: by-value and built-in
								 * fixed-length types, enums, bytea */
	IMAGE_TEXT,					/* text-like: checked for the encoding when a
								 * value goes out */
	IMAGE_NUMERIC,				/* numeric: header and digits checked */
	IMAGE_SENT					/* the binary send format, as a bytea image */
} ImageKind;

/*
 * How two items' keys compare where the key decides alone (see SetItem):
 * as PostgreSQL's own sorts specialize (sortsupport.h), an abbreviated key
 * or a by-value value compared as a signed or unsigned 64-bit or a signed
 * 32-bit integer, which a batch's sort compares inline; KEY_CALL: by the
 * comparator's function.
 */
typedef enum KeyOrder
{
	KEY_CALL,
	KEY_SIGNED,
	KEY_UNSIGNED,
	KEY_INT32
} KeyOrder;

/* How values of one type are compared, laid out, sent and received. */
typedef struct SetTypeInfo
{
	Oid			typid;
	Oid			collid;
	int16		typlen;
	bool		typbyval;
	char		typalign;
	ImageKind	kind;
	int16		imglen;			/* typlen of the images: -1 for IMAGE_SENT */
	bool		imgbyval;
	FmgrInfo	send;			/* IMAGE_SENT: to images */
	SortSupportData ssup;		/* the default btree order, in collid */
	SortSupportData abbrev;		/* the same, abbreviated where the type can */
	bool		abbreviated;	/* (abbrev has a converter) */
	KeyOrder	key_order;		/* how the items' keys compare */
	FmgrInfo	recv;			/* version 1 sets, and IMAGE_SENT's images */
	Oid			recv_ioparam;
	bool		domain;			/* typid is a domain: its values are checked
								 * as they leave a set (entry_value) */
	void	   *domain_extra;	/* domain_check's cache */
	MemoryContext cxt;			/* what is prepared for the type, deleted when
								 * a call brings another */
} SetTypeInfo;

/*
 * A value with its count, as the aggregate collects them, and its
 * abbreviated key (the value itself where the type has none): sorting a
 * batch's values compares keys next to each other, and reads the values,
 * scattered over the aggregate's memory, only where two keys tie.
 */
typedef struct SetItem
{
	Datum		value;
	Datum		key;
	int64		count;
	bytea	   *sent;			/* IMAGE_SENT: the value's image, made by
								 * set_sort for its sort only */
} SetItem;

/*
 * A set being built: values with their counts, in the order they came
 * until sorted (sorted: ascending, each value once).
 */
typedef struct ChangeSet
{
	SetTypeInfo *type;
	int			n;
	int			max;
	bool		sorted;
	SetItem    *items;
} ChangeSet;

/* An aligned buffer that an entry's value is made comparable in. */
typedef struct Scratch
{
	char	   *buf;
	Size		size;
} Scratch;

/* The binary receive function of t's type, looked up on first use. */
static void
set_type_recv(SetTypeInfo *t, MemoryContext cxt)
{
	Oid			recv;

	if (OidIsValid(t->recv.fn_oid))
		return;
	getTypeBinaryInputInfo(t->typid, &recv, &t->recv_ioparam);
	fmgr_info_cxt(recv, &t->recv, cxt);
}

/* How the images of type typid are laid out (see ImageKind). */
static ImageKind
image_kind(Oid typid, bool typbyval)
{
	Oid			base = getBaseType(typid);

	switch (base)
	{
		case TEXTOID:
		case VARCHAROID:
		case BPCHAROID:
			return IMAGE_TEXT;
		case BYTEAOID:
		case UUIDOID:
		case INTERVALOID:
		case TIMETZOID:
		case MACADDROID:
		case MACADDR8OID:
			return IMAGE_RAW;
		case NUMERICOID:
			return IMAGE_NUMERIC;
	}
	if (typbyval && (base < FirstNormalObjectId || type_is_enum(base)))
		return IMAGE_RAW;
	return IMAGE_SENT;
}

/*
 * The type's functions, kept in fn_extra (in fn_mcxt) between calls: for
 * the state store's merge, for as long as the store.
 */
/* The KeyOrder of keys that comparator compares. */
static KeyOrder
key_order(int (*comparator) (Datum, Datum, SortSupport))
{
	if (comparator == ssup_datum_signed_cmp)
		return KEY_SIGNED;
	if (comparator == ssup_datum_unsigned_cmp)
		return KEY_UNSIGNED;
	if (comparator == ssup_datum_int32_cmp)
		return KEY_INT32;
	return KEY_CALL;
}

static SetTypeInfo *
set_type_info(FunctionCallInfo fcinfo, Oid typid, Oid collid)
{
	SetTypeInfo *t = fcinfo->flinfo->fn_extra;

	if (t == NULL || t->typid != typid || t->collid != collid)
	{
		MemoryContext cxt;
		TypeCacheEntry *tce = lookup_type_cache(typid, TYPECACHE_LT_OPR);

		if (!OidIsValid(tce->lt_opr))
			ereport(ERROR,
					(errcode(ERRCODE_UNDEFINED_FUNCTION),
					 errmsg("could not identify a comparison function for type %s",
							format_type_be(typid))));
		if (t == NULL)
			t = MemoryContextAllocZero(fcinfo->flinfo->fn_mcxt, sizeof(SetTypeInfo));
		else
		{
			/* sets of another type or collation, row after row: no leak */
			MemoryContextDelete(t->cxt);
			memset(t, 0, sizeof(SetTypeInfo));
		}
		cxt = t->cxt = AllocSetContextCreate(fcinfo->flinfo->fn_mcxt, "streamwin change set type",
											 ALLOCSET_SMALL_SIZES);
		t->typid = typid;
		t->domain = getBaseType(typid) != typid;
		t->collid = collid;
		get_typlenbyvalalign(typid, &t->typlen, &t->typbyval, &t->typalign);
		t->kind = image_kind(typid, t->typbyval);
		t->imglen = t->kind == IMAGE_SENT ? -1 : t->typlen;
		t->imgbyval = t->kind == IMAGE_SENT ? false : t->typbyval;
		if (t->kind == IMAGE_SENT)
		{
			Oid			send;
			bool		varlena;

			getTypeBinaryOutputInfo(typid, &send, &varlena);
			fmgr_info_cxt(send, &t->send, cxt);
			set_type_recv(t, cxt);
		}
		t->ssup.ssup_cxt = cxt;
		t->ssup.ssup_collation = collid;
		t->ssup.ssup_nulls_first = false;
		t->ssup.abbreviate = false;
		PrepareSortSupportFromOrderingOp(tce->lt_opr, &t->ssup);
		t->abbrev.ssup_cxt = cxt;
		t->abbrev.ssup_collation = collid;
		t->abbrev.ssup_nulls_first = false;
		t->abbrev.abbreviate = true;
		PrepareSortSupportFromOrderingOp(tce->lt_opr, &t->abbrev);
		t->abbreviated = t->abbrev.abbrev_converter != NULL;
		t->key_order = key_order(t->abbreviated ? t->abbrev.comparator : t->ssup.comparator);
		fcinfo->flinfo->fn_extra = t;
	}
	return t;
}

static inline int
compare_values(SetTypeInfo *t, Datum a, Datum b)
{
	return t->ssup.comparator(a, b, &t->ssup);
}

/* An item of value (a copy of it, value_copy's) and count. */
static inline void
item_set(SetTypeInfo *t, SetItem *item, Datum value, int64 count)
{
	item->sent = NULL;
	item->value = value;
	item->key = t->abbreviated ? t->abbrev.abbrev_converter(value, &t->abbrev) : value;
	item->count = count;
}

/* --- images ---------------------------------------------------------------- */

/*
 * The bytes of value's image: a varlena's with a 1-byte header where it
 * fits one, as a tuple stores it.  value is as value_copy leaves it.
 */
static inline Size
image_len(SetTypeInfo *t, Datum v)
{
	if (t->imglen > 0)
		return t->imglen;
	if (t->imglen == -1)
	{
		Pointer		p = DatumGetPointer(v);

		return VARATT_CAN_MAKE_SHORT(p) ? VARATT_CONVERTED_SHORT_SIZE(p) : VARSIZE(p);
	}
	return strlen(DatumGetCString(v)) + 1;
}

static inline void
image_write(SetTypeInfo *t, char *dst, Datum v, Size len)
{
	if (t->imgbyval)
	{
		union
		{
			int64		i;
			char		c[sizeof(Datum)];
		}			tmp;

		store_att_byval(tmp.c, v, t->imglen);
		memcpy(dst, tmp.c, len);
	}
	else if (t->imglen == -1 && len != VARSIZE(DatumGetPointer(v)))
	{
		SET_VARSIZE_SHORT(dst, len);
		memcpy(dst + 1, VARDATA(DatumGetPointer(v)), len - 1);
	}
	else
		memcpy(dst, DatumGetPointer(v), len);
}

/* A count, zigzag-encoded as a varint (a batch's counts may be negative). */
static inline Size
count_write(char *dst, int64 count)
{
	uint64		zz = ((uint64) count << 1) ^ (uint64) (count >> 63);
	Size		n = 0;

	while (zz >= 0x80)
	{
		dst[n++] = (char) ((zz & 0x7F) | 0x80);
		zz >>= 7;
	}
	dst[n++] = (char) zz;
	return n;
}

/* The most bytes count_write takes. */
#define COUNT_MAX_LEN 10

/*
 * A copy of value fit to be an image and compared as often as a sort
 * needs: a varlena with a 4-byte header, uncompressed, in line (a short
 * header, as values come from a table, would make the type's comparator
 * copy it at every comparison).
 */
static Datum
value_copy(SetTypeInfo *t, Datum value)
{
	if (t->typlen == -1)
		return PointerGetDatum(pg_detoast_datum_copy((struct varlena *) DatumGetPointer(value)));
	return datumCopy(value, t->typbyval, t->typlen);
}

/* --- equal values, told apart ---------------------------------------------- */

/*
 * Values the type calls equal may differ (numeric 1.5 and 1.50, float8 0
 * and -0, text under a case-insensitive collation), and a retraction must
 * take back the very one its row held: plain SQL over the rows left shows
 * 1.50 once the 1.5 is gone.  So a set keeps each form apart, ordered by
 * the value, then by its image's bytes (imageorder); min, max and
 * DISTINCT read the forms of one value as that value.
 *
 * The bytes compared are an image's without its varlena header (which is
 * short or long by the value's size alone), so that an item's value, with
 * a 4-byte header, orders as the entry written from it.
 */
static inline int
image_order(const char *a, Size alen, const char *b, Size blen)
{
	int			c = memcmp(a, b, Min(alen, blen));

	if (c != 0)
		return c;
	return alen < blen ? -1 : alen > blen;
}

/* An entry's image bytes, as image_order reads them */
static inline void
entry_image_bytes(SetTypeInfo *t, const SetEntry *e, const char **p, Size *len)
{
	if (t->imglen == -1)
	{
		Size		hdr = VARATT_IS_1B(e->img) ? VARHDRSZ_SHORT : VARHDRSZ;

		*p = e->img + hdr;
		*len = e->img_len - hdr;
	}
	else
	{
		*p = e->img;
		*len = e->img_len;
	}
}

/* Two entries of equal values (compare_entries), in image order */
static inline int
compare_entry_images(SetTypeInfo *t, const SetEntry *a, const SetEntry *b)
{
	const char *pa;
	const char *pb;
	Size		la;
	Size		lb;

	entry_image_bytes(t, a, &pa, &la);
	entry_image_bytes(t, b, &pb, &lb);
	return image_order(pa, la, pb, lb);
}

/*
 * Two items of equal values, in the order of the images set_build writes
 * of them: a by-value value's typlen bytes as stored, a fixed-length one's
 * bytes, a varlena's data (value_copy leaves it a 4-byte header), a
 * cstring with its NUL, and for IMAGE_SENT the image set_sort made.
 */
static inline int
compare_item_images(SetTypeInfo *t, const SetItem *a, const SetItem *b)
{
	if (t->kind == IMAGE_SENT)
		return image_order(VARDATA(a->sent), VARSIZE(a->sent) - VARHDRSZ,
						   VARDATA(b->sent), VARSIZE(b->sent) - VARHDRSZ);
	if (t->imgbyval)
	{
		union
		{
			int64		i;
			char		c[sizeof(Datum)];
		}			x, y;

		store_att_byval(x.c, a->value, t->imglen);
		store_att_byval(y.c, b->value, t->imglen);
		return memcmp(x.c, y.c, t->imglen);
	}
	if (t->imglen > 0)
		return memcmp(DatumGetPointer(a->value), DatumGetPointer(b->value), t->imglen);
	if (t->imglen == -1)
		return image_order(VARDATA(DatumGetPointer(a->value)), VARSIZE(DatumGetPointer(a->value)) - VARHDRSZ,
						   VARDATA(DatumGetPointer(b->value)), VARSIZE(DatumGetPointer(b->value)) - VARHDRSZ);
	return strcmp(DatumGetCString(a->value), DatumGetCString(b->value));
}

/* --- reading version 2 ----------------------------------------------------- */

static void
set_corrupt(void)
{
	ereport(ERROR,
			(errcode(ERRCODE_DATA_CORRUPTED),
			 errmsg("streamwin: a change set is malformed")));
}

/*
 * Read the entry at off into e, checked to lie within the set: a set may
 * come from anywhere a bytea does.
 */
static inline void
entry_read(SetTypeInfo *t, const SetHeader *h, Size off, SetEntry *e)
{
	const char *start = (const char *) h + off;
	const char *p = start;
	const char *end = (const char *) h + VARSIZE(h);
	uint64		zz = 0;
	Size		len;

	if (off < sizeof(SetHeader))
		set_corrupt();
	for (int shift = 0;; shift += 7)
	{
		if (p >= end || shift > 63)
			set_corrupt();
		zz |= (uint64) (*p & 0x7F) << shift;
		if ((*p++ & 0x80) == 0)
			break;
	}
	e->count = (int64) ((zz >> 1) ^ (~(zz & 1) + 1));
	if (p >= end)
		set_corrupt();
	if (t->imglen > 0)
		len = t->imglen;
	else if (t->imglen == -1)
	{
		if (VARATT_IS_1B(p))
		{
			if (VARATT_IS_1B_E(p))
				set_corrupt();
			len = VARSIZE_1B(p);
		}
		else
		{
			union
			{
				uint32		word;
				char		c[4];
			}			hdr;

			if (end - p < VARHDRSZ)
				set_corrupt();
			memcpy(hdr.c, p, VARHDRSZ);
			if (!VARATT_IS_4B_U(hdr.c))
				set_corrupt();
			len = VARSIZE_4B(hdr.c);
			if (len < VARHDRSZ)
				set_corrupt();
		}
	}
	else
		len = strnlen(p, end - p) + 1;
	if (len > (Size) (end - p))
		set_corrupt();
	e->off = off;
	e->img = p;
	e->img_len = len;
	e->len = (p - start) + len;
}

/*
 * A numeric image as numeric.c lays it out on disk, read where it lies,
 * unaligned: a header of 2 bytes (short or
 * special) or 4 (long), then whole digits; a special value one of NaN,
 * Infinity and -Infinity.  img is a varlena with a 1- or 4-byte header.
 */
#define NUMERIC_SIGN_BITS 0xC000
#define NUMERIC_SHORT_BIT 0x8000
#define NUMERIC_SPECIAL_BITS 0xC000
#define NUMERIC_DIGIT_LIMIT 10000

typedef struct NumericImage
{
	int			order;			/* -1 -Infinity, 0 finite, 1 Infinity, 2 NaN */
	bool		negative;
	int			weight;			/* of the first digit, in base-10000 digits */
	int			ndigits;
	const char *digits;			/* int16s, maybe unaligned */
} NumericImage;

static inline void
numeric_image_read(const char *img, Size img_len, NumericImage *v)
{
	Size		hdr = VARATT_IS_1B(img) ? 1 : VARHDRSZ;
	const char *p = img + hdr;
	Size		size = img_len - hdr;
	uint16		header;

	if (img_len < hdr + sizeof(uint16))
		set_corrupt();
	memcpy(&header, p, sizeof(uint16));
	v->negative = false;
	v->weight = 0;
	v->ndigits = 0;
	v->digits = NULL;
	if ((header & NUMERIC_SIGN_BITS) == NUMERIC_SPECIAL_BITS)
	{
		/* exactly as numeric writes them: numeric's own tests compare the whole header */
		if (size != sizeof(uint16))
			set_corrupt();
		switch (header)
		{
			case 0xC000:
				v->order = 2;	/* NaN */
				break;
			case 0xD000:
				v->order = 1;	/* Infinity */
				break;
			case 0xF000:
				v->order = -1;	/* -Infinity */
				break;
			default:
				set_corrupt();
		}
		return;
	}
	v->order = 0;
	if (header & NUMERIC_SHORT_BIT)
	{
		/* sign 0x2000, weight in the low 7 bits, two's complement */
		v->negative = (header & 0x2000) != 0;
		v->weight = (header & 0x0040) ? (int) (header & 0x003F) - 64 : (int) (header & 0x003F);
		p += sizeof(uint16);
		size -= sizeof(uint16);
	}
	else
	{
		int16		weight;

		if (size < 2 * sizeof(uint16))
			set_corrupt();
		v->negative = (header & NUMERIC_SIGN_BITS) == 0x4000;
		memcpy(&weight, p + sizeof(uint16), sizeof(int16));
		v->weight = weight;
		p += 2 * sizeof(uint16);
		size -= 2 * sizeof(uint16);
	}
	if (size % sizeof(int16) != 0)
		set_corrupt();
	v->ndigits = size / sizeof(int16);
	v->digits = p;
}

/* v's digit of weight w (0 past either end). */
static inline int
numeric_image_digit(const NumericImage *v, int w)
{
	int			i = v->weight - w;
	int16		d;

	if (i < 0 || i >= v->ndigits)
		return 0;
	memcpy(&d, v->digits + i * sizeof(int16), sizeof(int16));
	return d;
}

/*
 * A numeric's image checked as numeric's functions read it: its layout
 * (numeric_image_read), and each digit below 10000.  p is a varlena with a
 * 4-byte header.
 */
static void
numeric_image_check(const char *p)
{
	NumericImage v;

	numeric_image_read(p, VARSIZE(p), &v);
	for (int w = v.weight; w > v.weight - v.ndigits; w--)
	{
		int			d = numeric_image_digit(&v, w);

		if (d < 0 || d >= NUMERIC_DIGIT_LIMIT)
			set_corrupt();
	}
}

/*
 * An entry's value, to compare: in sc (by reference: a pointer into it,
 * which the next call for sc replaces), aligned, a varlena with a 4-byte
 * header; an IMAGE_SENT type's received, in CurrentMemoryContext.
 */
static inline Datum
entry_datum(SetTypeInfo *t, const SetEntry *e, Scratch *sc)
{
	bool		shorthdr = t->imglen == -1 && VARATT_IS_1B(e->img);
	Size		need = shorthdr ? e->img_len - 1 + VARHDRSZ : e->img_len;

	if (t->imglen == -2)
		return PointerGetDatum(e->img);
	/*
	 * A sent image is received from a StringInfo, whose data ends in a NUL
	 * past its length (stringinfo.h): array_recv and record_recv write one
	 * there and back around each element, tsvectorrecv reads a string up
	 * to it.  So there is room for it.
	 */
	if (need + 1 > sc->size)
	{
		if (sc->buf)
			pfree(sc->buf);
		sc->size = Max(need + 1, 2 * sc->size);
		sc->buf = palloc(sc->size);
	}
	if (shorthdr)
	{
		SET_VARSIZE(sc->buf, need);
		memcpy(sc->buf + VARHDRSZ, e->img + 1, e->img_len - 1);
	}
	else
		memcpy(sc->buf, e->img, e->img_len);
	switch (t->kind)
	{
		case IMAGE_NUMERIC:
			numeric_image_check(sc->buf);
			break;
		case IMAGE_SENT:
			{
				StringInfoData buf;

				buf.data = VARDATA(sc->buf);
				buf.len = VARSIZE(sc->buf) - VARHDRSZ;
				buf.data[buf.len] = '\0';
				buf.maxlen = buf.len + 1;
				buf.cursor = 0;
				return ReceiveFunctionCall(&t->recv, &buf, t->recv_ioparam, -1);
			}
		default:
			break;
	}
	if (t->typbyval)
		return fetch_att(sc->buf, true, t->typlen);
	return PointerGetDatum(sc->buf);
}

/*
 * Two numeric images compared where they lie (numeric_image_read): so that
 * a merge compares two values of a set without copying either into a
 * buffer (entry_datum) and calling numeric's comparator.  The order is
 * numeric's: -Infinity, the finite values, then Infinity, then NaN; the
 * finite values by sign, then by their digits aligned on their weights (a
 * digit past either end counts 0, so that a value written with zero digits
 * at either end compares as the same value).  The digits are not checked
 * here (numeric_image_check): a wrong digit only misplaces its entry, whose
 * value is checked when it is read out.
 */
/* |x| against |y|, digit by digit from the highest weight either has. */
static int
numeric_image_compare_abs(const NumericImage *x, const NumericImage *y)
{
	int			top = Max(x->weight, y->weight);
	int			bottom = Min(x->weight - x->ndigits + 1, y->weight - y->ndigits + 1);

	for (int w = top; w >= bottom; w--)
	{
		int			dx = numeric_image_digit(x, w);
		int			dy = numeric_image_digit(y, w);

		if (dx != dy)
			return dx < dy ? -1 : 1;
	}
	return 0;
}

static int
numeric_image_compare(const NumericImage *x, const NumericImage *y)
{
	int			c;

	if (x->order != 0 || y->order != 0)
		return x->order == y->order ? 0 : (x->order < y->order ? -1 : 1);
	/* no digits: zero, whatever its sign bit */
	if (x->ndigits == 0 || y->ndigits == 0)
	{
		if (x->ndigits == y->ndigits)
			return 0;
		if (x->ndigits == 0)
			return y->negative ? 1 : -1;
		return x->negative ? -1 : 1;
	}
	if (x->negative != y->negative)
		return x->negative ? -1 : 1;
	c = numeric_image_compare_abs(x, y);
	return x->negative ? -c : c;
}

/*
 * An entry made comparable (compare_entries): a numeric's image read in
 * place, any other type's value made by entry_datum in sc.
 */
typedef struct EntryKey
{
	Datum		value;
	NumericImage num;
} EntryKey;

static inline void
entry_key(SetTypeInfo *t, const SetEntry *e, Scratch *sc, EntryKey *k)
{
	if (t->kind == IMAGE_NUMERIC)
		numeric_image_read(e->img, e->img_len, &k->num);
	else
		k->value = entry_datum(t, e, sc);
}

static inline int
compare_entries(SetTypeInfo *t, const EntryKey *a, const EntryKey *b)
{
	if (t->kind == IMAGE_NUMERIC)
		return numeric_image_compare(&a->num, &b->num);
	return compare_values(t, a->value, b->value);
}

/*
 * An entry's value, a copy of its own (in CurrentMemoryContext), to go out
 * of the set: text checked against the database encoding.
 */
static Datum
entry_value(SetTypeInfo *t, const SetEntry *e)
{
	Scratch		sc = {NULL, 0};
	Datum		v = entry_datum(t, e, &sc);

	if (t->imglen == -2)
		return PointerGetDatum(pstrdup(e->img));
	if (t->kind == IMAGE_SENT)
	{
		if (sc.buf)
			pfree(sc.buf);
		return v;
	}
	if (t->kind == IMAGE_TEXT)
		pg_verifymbstr(VARDATA(sc.buf), VARSIZE(sc.buf) - VARHDRSZ, false);
	/* a set handed in by hand may hold any image: the domain says if it is one of its values */
	if (t->domain)
		domain_check(v, false, t->typid, &t->domain_extra, t->cxt);
	if (t->typbyval)
		pfree(sc.buf);
	return v;
}

/* A set built from items[0, n) (sorted, each value once), counts of 0 left out. */
static SetHeader *
set_build(SetTypeInfo *t, SetItem *items, int n, uint32 version)
{
	Size		size = sizeof(SetHeader);
	SetHeader  *h;
	Size		off;
	int			kept = 0;
	Datum	   *images = palloc(sizeof(Datum) * Max(n, 1));

	for (int i = 0; i < n; i++)
	{
		if (items[i].count == 0)
			continue;
		images[i] = t->kind == IMAGE_SENT ?
			PointerGetDatum(SendFunctionCall(&t->send, items[i].value)) : items[i].value;
		size += COUNT_MAX_LEN + image_len(t, images[i]);
	}
	h = palloc0(size);
	h->version = pg_hton32(version);
	h->arch = SET_ARCH;
	h->typid = t->typid;
	h->collid = t->collid;
	off = sizeof(SetHeader);
	for (int i = 0; i < n; i++)
	{
		char	   *e = (char *) h + off;
		Size		len;
		Size		clen;

		if (items[i].count == 0)
			continue;
		len = image_len(t, images[i]);
		clen = count_write(e, items[i].count);
		image_write(t, e + clen, images[i], len);
		h->last = off;
		off += clen + len;
		kept++;
	}
	h->n = kept;
	SET_VARSIZE(h, off);
	pfree(images);
	return h;
}

/* --- version 1 --------------------------------------------------------------- */

/*
 * A version 1 set read as its items (in CurrentMemoryContext): each value
 * received from its send format.
 */
static SetItem *
set_read_v1(FunctionCallInfo fcinfo, bytea *b, SetTypeInfo **type, int *n)
{
	StringInfoData buf;
	StringInfoData item;
	Oid			typid;
	Oid			collid;
	SetItem    *items;
	int			count;

	buf.data = VARDATA_ANY(b);
	buf.len = VARSIZE_ANY_EXHDR(b);
	buf.maxlen = buf.len;
	buf.cursor = 0;
	if (pq_getmsgint(&buf, 4) != CHANGE_SET_V1)
		set_corrupt();
	typid = pq_getmsgint(&buf, 4);
	collid = pq_getmsgint(&buf, 4);
	count = pq_getmsgint(&buf, 4);
	if (count < 0 || count > buf.len)
		set_corrupt();
	*type = set_type_info(fcinfo, typid, collid);
	set_type_recv(*type, fcinfo->flinfo->fn_mcxt);
	items = palloc(sizeof(SetItem) * Max(count, 1));
	initStringInfo(&item);
	for (int i = 0; i < count; i++)
	{
		int64		c = pq_getmsgint64(&buf);
		int			len = pq_getmsgint(&buf, 4);
		Datum		v;

		resetStringInfo(&item);
		appendBinaryStringInfo(&item, pq_getmsgbytes(&buf, len), len);
		v = ReceiveFunctionCall(&(*type)->recv, &item, (*type)->recv_ioparam, -1);
		item_set(*type, &items[i], value_copy(*type, v), c);
	}
	pq_getmsgend(&buf);
	pfree(item.data);
	*n = count;
	return items;
}

/*
 * A set, as version 2, and its type: version 1 converted, and one whose
 * header does not lie aligned (a small one in line in a tuple, with a
 * 1-byte header, detoasted in place) copied.
 */
static SetHeader *
set_open(FunctionCallInfo fcinfo, Datum d, SetTypeInfo **type)
{
	bytea	   *b = (bytea *) PG_DETOAST_DATUM(d);
	uint32		version;
	SetHeader  *h;

	if (VARSIZE(b) < VARHDRSZ + sizeof(uint32))
		set_corrupt();
	memcpy(&version, VARDATA(b), sizeof(uint32));
	version = pg_ntoh32(version);
	if (version == CHANGE_SET_V1)
	{
		int			n;
		SetItem    *items = set_read_v1(fcinfo, b, type, &n);

		/* one entry per value, as version 2 */
		return set_build(*type, items, n, CHANGE_SET_V2);
	}
	if (version != CHANGE_SET_V2 && version != CHANGE_SET_V3)
		ereport(ERROR,
				(errcode(ERRCODE_DATA_CORRUPTED),
				 errmsg("streamwin: a change set of an unknown version")));
	if (VARSIZE(b) < sizeof(SetHeader))
		set_corrupt();
	if ((uintptr_t) b % sizeof(uint32) != 0)
	{
		bytea	   *copy = palloc(VARSIZE(b));

		memcpy(copy, b, VARSIZE(b));
		b = copy;
	}
	h = (SetHeader *) b;
	if (h->arch != SET_ARCH)
		ereport(ERROR,
				(errcode(ERRCODE_DATA_CORRUPTED),
				 errmsg("streamwin: a change set written on another kind of machine"),
				 errdetail("Counted values keep the images of their values, in the byte order they were written with."),
				 errhint("Rebuild the query's state from its source with streamwin.reset_query().")));
	/* (an entry takes 2 bytes at least: a count and an image) */
	if (h->n < 0 || (h->n > 0) != (h->last != 0) ||
		(Size) h->n > (VARSIZE(h) - sizeof(SetHeader)) / 2)
		set_corrupt();
	*type = set_type_info(fcinfo, h->typid, h->collid);
	return h;
}

/* --- the aggregate ----------------------------------------------------------- */

/*
 * Items in order: by their keys, then where keys tie (abbreviated) by the
 * values.  Keys that compare as integers (t->key_order) are compared here,
 * the rest by the comparator's function.
 */
static inline int
compare_item_values(SetTypeInfo *t, const SetItem *a, const SetItem *b)
{
	switch (t->key_order)
	{
		case KEY_SIGNED:
			if (DatumGetInt64(a->key) != DatumGetInt64(b->key))
				return DatumGetInt64(a->key) < DatumGetInt64(b->key) ? -1 : 1;
			break;
		case KEY_UNSIGNED:
			if (a->key != b->key)
				return a->key < b->key ? -1 : 1;
			break;
		case KEY_INT32:
			if (DatumGetInt32(a->key) != DatumGetInt32(b->key))
				return DatumGetInt32(a->key) < DatumGetInt32(b->key) ? -1 : 1;
			break;
		case KEY_CALL:
			if (!t->abbreviated)
				return t->ssup.comparator(a->value, b->value, &t->ssup);
			{
				int			c = t->abbrev.comparator(a->key, b->key, &t->abbrev);

				if (c != 0)
					return c;
			}
			break;
	}
	if (!t->abbreviated)
		return 0;				/* the keys are the values */
	return t->abbrev.abbrev_full_comparator(a->value, b->value, &t->abbrev);
}

/* Items in a set's order: by value, equal values by their images */
static inline int
compare_items(const SetItem *a, const SetItem *b, SetTypeInfo *t)
{
	int			c = compare_item_values(t, a, b);

	if (c != 0)
		return c;
	return compare_item_images(t, a, b);
}

/*
 * The sort of a batch's items, the comparison compiled into it
 * (PostgreSQL's sort_template.h): through qsort_arg, a comparison was two
 * calls through function pointers before the type's own.
 */
#define ST_SORT sort_items
#define ST_ELEMENT_TYPE SetItem
#define ST_COMPARE(a, b, arg) compare_items(a, b, arg)
#define ST_COMPARE_ARG_TYPE SetTypeInfo
#define ST_SCOPE static
#define ST_DEFINE
#include "lib/sort_template.h"

/*
 * Sort the items and add up the counts of the same values (equal, and the
 * same image), in place: the set holds the same values with the same
 * counts after as before.  An IMAGE_SENT type's images are made for the
 * sort, in CurrentMemoryContext (a later call sorts again, or finds the
 * items sorted and needs none).
 */
static void
set_sort(ChangeSet *s)
{
	int			kept = 0;

	if (s->sorted)
		return;
	if (s->type->kind == IMAGE_SENT)
		for (int i = 0; i < s->n; i++)
			s->items[i].sent = SendFunctionCall(&s->type->send, s->items[i].value);
	sort_items(s->items, s->n, s->type);
	for (int i = 0; i < s->n; i++)
	{
		if (kept > 0 && compare_items(&s->items[kept - 1], &s->items[i], s->type) == 0)
			s->items[kept - 1].count += s->items[i].count;
		else
			s->items[kept++] = s->items[i];
	}
	for (int i = 0; i < kept; i++)
		s->items[i].sent = NULL;
	s->n = kept;
	s->sorted = true;
}

/*
 * streamwin.change_set_accum(state internal, x anyelement, change smallint):
 * the transition of streamwin.change_set.  A NULL x counts for nothing, as
 * min, max and DISTINCT aggregates skip NULL.  The values are kept as they
 * come and sorted once, by the final function: a batch's group holds a few
 * hundred rows, where an insertion in order per row moved the values
 * after it every time.
 */
Datum
streamwin_change_set_accum(PG_FUNCTION_ARGS)
{
	MemoryContext aggcxt;
	MemoryContext old;
	ChangeSet  *s = PG_ARGISNULL(0) ? NULL : (ChangeSet *) PG_GETARG_POINTER(0);

	if (!AggCheckCallContext(fcinfo, &aggcxt))
		elog(ERROR, "streamwin.change_set_accum called in non-aggregate context");
	if (PG_ARGISNULL(1) || PG_ARGISNULL(2))
	{
		if (s == NULL)
			PG_RETURN_NULL();
		PG_RETURN_POINTER(s);
	}
	/*
	 * A by-value type's value the same, bit for bit, as the last one taken
	 * (a numeric sum's scales, mostly one per column): counted there, so
	 * that such runs cost neither an item nor a place in the sort.
	 */
	if (s != NULL && s->n > 0 && s->type->typbyval &&
		s->items[s->n - 1].value == PG_GETARG_DATUM(1))
	{
		s->items[s->n - 1].count += PG_GETARG_INT16(2);
		PG_RETURN_POINTER(s);
	}
	old = MemoryContextSwitchTo(aggcxt);
	if (s == NULL)
	{
		s = palloc0(sizeof(ChangeSet));
		s->type = set_type_info(fcinfo, get_fn_expr_argtype(fcinfo->flinfo, 1), PG_GET_COLLATION());
		s->max = 16;
		s->items = palloc(sizeof(SetItem) * s->max);
	}
	else if (s->n == s->max)
	{
		s->max *= 2;
		s->items = repalloc_huge(s->items, sizeof(SetItem) * s->max);
	}
	item_set(s->type, &s->items[s->n], value_copy(s->type, PG_GETARG_DATUM(1)), PG_GETARG_INT16(2));
	s->n++;
	s->sorted = false;
	MemoryContextSwitchTo(old);
	PG_RETURN_POINTER(s);
}

/*
 * streamwin.change_set_final(state internal) RETURNS bytea.  It sorts the
 * state in place, which leaves it the same multiset of values: a second
 * call, or further rows, find it as valid as before.
 */
Datum
streamwin_change_set_final(PG_FUNCTION_ARGS)
{
	ChangeSet  *s;

	if (PG_ARGISNULL(0))
		PG_RETURN_NULL();
	s = (ChangeSet *) PG_GETARG_POINTER(0);
	set_sort(s);
	PG_RETURN_BYTEA_P(set_build(s->type, s->items, s->n, CHANGE_SET_V3));
}

/* --- merging and reading ----------------------------------------------------- */

/*
 * A batch's set is mostly far smaller than its group's (tens of values
 * against a thousand): then each of its values is looked for in the
 * group's set by binary search over the entries' offsets, found in one
 * pass that reads their lengths alone, and the group's entries between are
 * copied as one block.  A value is compared a dozen times rather than
 * every entry of the group's set once, and most entries are never made
 * into a value to compare (entry_datum): that was most of a merge.
 */
static inline bool
merge_by_search(const SetHeader *a, const SetHeader *b)
{
	return b->n > 0 && (int64) b->n * 32 < a->n;
}

/*
 * Append len bytes of entries (nentries of them, the last last_rel bytes
 * after src) to out at *off.
 */
static inline void
out_append(SetHeader *out, Size *off, const char *src, Size len, int nentries, Size last_rel)
{
	memcpy((char *) out + *off, src, len);
	out->last = *off + last_rel;
	out->n += nentries;
	*off += len;
}

/* Append entry e to out at *off with another count: the entry's image, that count. */
static inline void
out_recount(SetHeader *out, Size *off, int64 count, const SetEntry *e)
{
	char	   *dst = (char *) out + *off;
	Size		len = count_write(dst, count);

	memcpy(dst + len, e->img, e->img_len);
	out->last = *off;
	out->n++;
	*off += len + e->img_len;
}

/* Is set h of version 3, its forms of a value apart? */
static inline bool
set_forms_apart(const SetHeader *h)
{
	return pg_ntoh32(h->version) == CHANGE_SET_V3;
}

/*
 * b with the forms of each value counted as one, under the first one's
 * image, as version 2 counts them: what merges into a set of version 2.
 */
static SetHeader *
set_forms_together(SetTypeInfo *t, const SetHeader *b)
{
	SetHeader  *out = palloc(VARSIZE(b) + (Size) b->n * COUNT_MAX_LEN);
	Scratch		sc[2] = {{NULL, 0}, {NULL, 0}};
	EntryKey	keys[2];
	SetEntry	e;
	SetEntry	kept = {0};
	int64		count = 0;
	int			k = 0;
	Size		off = sizeof(SetHeader);
	Size		in = sizeof(SetHeader);

	memcpy(out, b, sizeof(SetHeader));
	out->version = pg_hton32(CHANGE_SET_V2);
	out->n = 0;
	out->last = 0;
	for (int i = 0; i <= b->n; i++)
	{
		if (i < b->n)
		{
			entry_read(t, b, in, &e);
			in += e.len;
			entry_key(t, &e, &sc[k], &keys[k]);
			if (kept.img != NULL && compare_entries(t, &keys[1 - k], &keys[k]) == 0)
			{
				if (pg_add_s64_overflow(count, e.count, &count))
					set_corrupt();
				continue;
			}
		}
		if (kept.img != NULL && count != 0)
			out_recount(out, &off, count, &kept);
		if (i < b->n)
		{
			kept = e;
			count = e.count;
			k = 1 - k;
		}
	}
	SET_VARSIZE(out, off);
	return out;
}

/*
 * streamwin_change_set_merge's result, a's and b's counts added, into out
 * (room enough, its header a's) by merge_by_search's way.  Each value of b
 * as the linear merge takes it: a's entry kept if its count stays, b's
 * taken if a has none of the value (or counts it 0), the sum written with
 * a's image if it is not 0.  exact: the forms of a value are apart.
 */
static void
set_merge_searched(SetTypeInfo *t, const SetHeader *a, const SetHeader *b, SetHeader *out,
				   bool exact)
{
	Size	   *offs = palloc(sizeof(Size) * ((Size) a->n + 1));
	Scratch		sa = {NULL, 0};
	Scratch		sb = {NULL, 0};
	SetEntry	e;
	SetEntry	eb;
	Size		off = sizeof(SetHeader);
	Size		boff = sizeof(SetHeader);
	int			next = 0;		/* a's first entry not yet in out */

	/* where each entry of a starts (offs[a->n]: where the set ends) */
	offs[0] = sizeof(SetHeader);
	for (int i = 0; i < a->n; i++)
	{
		entry_read(t, a, offs[i], &e);
		offs[i + 1] = offs[i] + e.len;
	}
	out->n = 0;
	out->last = 0;
	for (int j = 0; j < b->n; j++)
	{
		EntryKey	kb;
		int			lo = next;
		int			hi = a->n;
		bool		equal = false;
		int64		sum;

		entry_read(t, b, boff, &eb);
		boff += eb.len;
		entry_key(t, &eb, &sb, &kb);
		/* lo: a's first entry from next on whose value is not below b's */
		while (lo < hi)
		{
			int			mid = lo + (hi - lo) / 2;
			int			c;
			EntryKey	ka;

			entry_read(t, a, offs[mid], &e);
			entry_key(t, &e, &sa, &ka);
			c = compare_entries(t, &ka, &kb);
			if (c == 0 && exact)
				c = compare_entry_images(t, &e, &eb);
			if (c < 0)
				lo = mid + 1;
			else
			{
				hi = mid;
				equal = c == 0;
			}
		}
		/* equal: the last entry compared was lo's, and holds b's value */
		equal = equal && lo < a->n;

		/* a's entries below b's value, as they are, in one copy */
		if (lo > next)
			out_append(out, &off, (const char *) a + offs[next], offs[lo] - offs[next],
					   lo - next, offs[lo - 1] - offs[next]);
		next = lo;
		if (!equal)
		{
			out_append(out, &off, (const char *) b + eb.off, eb.len, 1, 0);
			continue;
		}
		entry_read(t, a, offs[lo], &e);
		next = lo + 1;
		/* counts of a stored set are checked, not trusted: no overflow */
		if (pg_add_s64_overflow(e.count, eb.count, &sum))
			set_corrupt();
		if (sum == e.count)
			out_append(out, &off, (const char *) a + e.off, e.len, 1, 0);
		else if (e.count == 0)
			out_append(out, &off, (const char *) b + eb.off, eb.len, 1, 0);
		else if (sum != 0)
			out_recount(out, &off, sum, &e);
		/* (counted 0: left out) */
	}
	/* the rest of a */
	if (next < a->n)
		out_append(out, &off, (const char *) a + offs[next], offs[a->n] - offs[next],
				   a->n - next, offs[a->n - 1] - offs[next]);
	SET_VARSIZE(out, off);
	pfree(offs);
	if (sa.buf)
		pfree(sa.buf);
	if (sb.buf)
		pfree(sb.buf);
}

/*
 * streamwin.change_set_merge(a bytea, b bytea) RETURNS bytea: each value
 * counted as often as in a and b together; NULL is the empty set.  One
 * pass over both, in order, copying entries whole where their count stays:
 * a group's set and a batch's set of it cost a comparison per entry and
 * no conversion (but for a small b: merge_by_search).  Entries of a copied
 * as a block by the search are not checked as values (entry_datum) here:
 * whatever reads them later does.
 */
Datum
streamwin_change_set_merge(PG_FUNCTION_ARGS)
{
	SetTypeInfo *t;
	SetTypeInfo *tb;
	int64		sum = 0;
	SetHeader  *a;
	SetHeader  *b;
	SetHeader  *out;
	SetEntry	ea = {0};
	SetEntry	eb = {0};
	EntryKey	ka = {0};
	EntryKey	kb = {0};
	Scratch		sa = {NULL, 0};
	Scratch		sb = {NULL, 0};
	Size		off = sizeof(SetHeader);
	int			na = 0;
	int			nb = 0;
	int			n = 0;
	bool		exact;

	if (PG_ARGISNULL(0) && PG_ARGISNULL(1))
		PG_RETURN_NULL();
	if (PG_ARGISNULL(0))
		PG_RETURN_DATUM(PG_GETARG_DATUM(1));
	if (PG_ARGISNULL(1))
		PG_RETURN_DATUM(PG_GETARG_DATUM(0));
	b = set_open(fcinfo, PG_GETARG_DATUM(1), &tb);
	a = set_open(fcinfo, PG_GETARG_DATUM(0), &t);
	if (a->typid != b->typid)
		elog(ERROR, "streamwin: change sets of types %s and %s cannot merge",
			 format_type_be(a->typid), format_type_be(b->typid));

	/*
	 * The result is in a's collation, as a version 1 merge kept a's; b in
	 * another (only a set written by hand) is sorted in a's first.
	 */
	if (b->collid != a->collid)
	{
		ChangeSet	bs = {t, 0, 0, false, NULL};
		Size		o = sizeof(SetHeader);

		bs.items = palloc(sizeof(SetItem) * Max(b->n, 1));
		for (bs.n = 0; bs.n < b->n; bs.n++)
		{
			SetEntry	e;

			entry_read(t, b, o, &e);
			o += e.len;
			item_set(t, &bs.items[bs.n], entry_value(t, &e), e.count);
		}
		set_sort(&bs);
		b = set_build(t, bs.items, bs.n, CHANGE_SET_V3);
	}
	exact = set_forms_apart(a);
	if (!exact && set_forms_apart(b))
		b = set_forms_together(t, b);

	/* an entry whose count changes may take a longer count: room for it */
	out = palloc(VARSIZE(a) + VARSIZE(b) + COUNT_MAX_LEN);
	memcpy(out, a, sizeof(SetHeader));
	out->last = 0;
	if (merge_by_search(a, b))
	{
		set_merge_searched(t, a, b, out, exact);
		PG_RETURN_BYTEA_P(out);
	}
	if (a->n > 0)
	{
		entry_read(t, a, sizeof(SetHeader), &ea);
		entry_key(t, &ea, &sa, &ka);
	}
	if (b->n > 0)
	{
		entry_read(t, b, sizeof(SetHeader), &eb);
		entry_key(t, &eb, &sb, &kb);
	}
	while (na < a->n || nb < b->n)
	{
		char	   *e = (char *) out + off;
		int			c;
		Size		len;

		if (na == a->n)
			c = 1;
		else if (nb == b->n)
			c = -1;
		else
		{
			c = compare_entries(t, &ka, &kb);
			if (c == 0 && exact)
				c = compare_entry_images(t, &ea, &eb);
		}
		/* counts of a stored set are checked, not trusted: no overflow */
		if (c == 0 && pg_add_s64_overflow(ea.count, eb.count, &sum))
			set_corrupt();
		if (c < 0 || (c == 0 && sum == ea.count))
		{
			memcpy(e, (const char *) a + ea.off, ea.len);
			len = ea.len;
		}
		else if (c > 0 || ea.count == 0)
		{
			memcpy(e, (const char *) b + eb.off, eb.len);
			len = eb.len;
		}
		else if (sum != 0)
		{
			len = count_write(e, sum);
			memcpy(e + len, ea.img, ea.img_len);
			len += ea.img_len;
		}
		else
			len = 0;			/* counted 0: left out */
		if (len > 0)
		{
			out->last = off;
			off += len;
			n++;
		}
		/* the next entry of each set whose entry this took */
		if (c <= 0 && ++na < a->n)
		{
			entry_read(t, a, ea.off + ea.len, &ea);
			entry_key(t, &ea, &sa, &ka);
		}
		if (c >= 0 && ++nb < b->n)
		{
			entry_read(t, b, eb.off + eb.len, &eb);
			entry_key(t, &eb, &sb, &kb);
		}
	}
	out->n = n;
	SET_VARSIZE(out, off);
	PG_RETURN_BYTEA_P(out);
}

/*
 * The set of argument 0, its type checked against argument 1's: the set's
 * own, or a domain's base type (a NULL of a NOT NULL domain cannot be
 * written; the values still leave the set checked by the domain).
 */
static SetHeader *
final_set(FunctionCallInfo fcinfo, SetTypeInfo **t)
{
	SetHeader  *h = set_open(fcinfo, PG_GETARG_DATUM(0), t);
	Oid			asked = get_fn_expr_argtype(fcinfo->flinfo, 1);

	if (h->typid != asked && getBaseType(h->typid) != asked)
		elog(ERROR, "streamwin: a change set of type %s read as %s",
			 format_type_be(h->typid), format_type_be(asked));
	return h;
}

/*
 * The smallest (last: the largest) value a set holds, count > 0: its first
 * entry, or its last, read where it lies.  A set in a group's state has
 * every value of the group's rows, and min or max is computed for the
 * group after every batch that changes it.  A set of a batch may hold
 * retractions (count < 0), passed over.
 */
static Datum
set_extreme(FunctionCallInfo fcinfo, bool last)
{
	SetTypeInfo *t;
	SetHeader  *h;
	SetEntry	e;
	SetEntry	found = {0};
	Size		off = sizeof(SetHeader);

	if (PG_ARGISNULL(0))
		PG_RETURN_NULL();
	h = final_set(fcinfo, &t);
	if (h->n == 0)
		PG_RETURN_NULL();
	if (last)
	{
		entry_read(t, h, h->last, &e);
		if (e.count > 0)
			found = e;
	}
	if (found.img == NULL)
		for (int i = 0; i < h->n; i++)
		{
			entry_read(t, h, off, &e);
			off += e.len;
			if (e.count > 0)
			{
				found = e;
				if (!last)
					break;
			}
		}
	if (found.img == NULL)
		PG_RETURN_NULL();			/* none: a set of retractions only */
	PG_RETURN_DATUM(entry_value(t, &found));
}

/* streamwin.change_set_min(set bytea, type anyelement) RETURNS anyelement */
Datum
streamwin_change_set_min(PG_FUNCTION_ARGS)
{
	return set_extreme(fcinfo, false);
}

/* streamwin.change_set_max(set bytea, type anyelement) RETURNS anyelement */
Datum
streamwin_change_set_max(PG_FUNCTION_ARGS)
{
	return set_extreme(fcinfo, true);
}

/*
 * streamwin.change_set_values(set bytea, type anyelement) RETURNS anyarray:
 * the values a set holds, count > 0 (none: a set of retractions only),
 * each once: of the forms of an equal value (see image_order), the first.
 */
Datum
streamwin_change_set_values(PG_FUNCTION_ARGS)
{
	Oid			typid = get_fn_expr_argtype(fcinfo->flinfo, 1);
	SetTypeInfo *t;
	SetHeader  *h;
	Datum	   *values;
	int			n = 0;
	Size		off = sizeof(SetHeader);
	Scratch		scratch[2] = {{NULL, 0}, {NULL, 0}};
	EntryKey	keys[2];
	int			last = -1;		/* keys[last]: the last value taken */

	if (PG_ARGISNULL(0))
		PG_RETURN_ARRAYTYPE_P(construct_empty_array(typid));
	h = final_set(fcinfo, &t);
	values = palloc(sizeof(Datum) * Max(h->n, 1));
	for (int i = 0; i < h->n; i++)
	{
		SetEntry	e;
		int			k = last == 0 ? 1 : 0;

		entry_read(t, h, off, &e);
		off += e.len;
		if (e.count <= 0)
			continue;
		entry_key(t, &e, &scratch[k], &keys[k]);
		if (last >= 0 && compare_entries(t, &keys[last], &keys[k]) == 0)
			continue;
		values[n++] = entry_value(t, &e);
		last = k;
	}
	if (n == 0)
		PG_RETURN_ARRAYTYPE_P(construct_empty_array(typid));
	PG_RETURN_ARRAYTYPE_P(construct_array(values, n, typid, t->typlen, t->typbyval, t->typalign));
}

/*
 * streamwin.change_set_rows(set bytea, type anyelement) RETURNS anyarray:
 * the values of the rows a set counts, each as many times as rows hold it
 * (count > 0), every form of an equal value as its rows hold it: the
 * multiset a group's rows hold, for an aggregate with an inverse
 * transition function to run over as over the rows themselves.  A value
 * is copied out once and its Datum repeated, so a value many rows hold
 * costs one copy.
 */
Datum
streamwin_change_set_rows(PG_FUNCTION_ARGS)
{
	Oid			typid = get_fn_expr_argtype(fcinfo->flinfo, 1);
	SetTypeInfo *t;
	SetHeader  *h;
	Datum	   *values;
	int64		n = 0;
	int64		size;
	Size		off = sizeof(SetHeader);

	if (PG_ARGISNULL(0))
		PG_RETURN_ARRAYTYPE_P(construct_empty_array(typid));
	h = final_set(fcinfo, &t);
	size = Max(h->n, 1);
	values = palloc(sizeof(Datum) * size);
	for (int i = 0; i < h->n; i++)
	{
		SetEntry	e;
		Datum		v;

		entry_read(t, h, off, &e);
		off += e.len;
		if (e.count <= 0)
			continue;
		if (e.count > (int64) MaxArraySize - n)
			ereport(ERROR,
					(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
					 errmsg("a group's rows hold more values than an array can hand to its aggregate"),
					 errdetail("An array holds at most %d values.", (int) MaxArraySize)));
		if (n + e.count > size)
		{
			size = Max(size * 2, n + e.count);
			values = repalloc_huge(values, sizeof(Datum) * size);
		}
		v = entry_value(t, &e);
		for (int64 k = 0; k < e.count; k++)
			values[n++] = v;
	}
	if (n == 0)
		PG_RETURN_ARRAYTYPE_P(construct_empty_array(typid));
	PG_RETURN_ARRAYTYPE_P(construct_array(values, (int) n, typid, t->typlen, t->typbyval, t->typalign));
}
