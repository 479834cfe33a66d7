/*
 * The data section of a stream set object (ingest/s3stream/objects/format.py
 * describes the format), laid out in one buffer.
 *
 * Why C: an upload of a latency-bound producer's traffic holds thousands of
 * small batches (6,000 of about 1.1 KB in 2 s of the paced 20 MB/s run). The
 * Python encoder spends 2 us of interpreter time on each (two CRC calls, a
 * pack, list appends) and then joins 12,000 buffers: 13-16 ms per upload on
 * the builder thread, holding the GIL in 1 ms slices, so the event loop
 * waits up to a switch interval each time it wants the GIL meanwhile. Here
 * the attributes are read with the GIL held (about 0.1 us a batch); the
 * CRCs and copies run without it. The CRC32C is computed here because the
 * crc32c package offers only a Python call, which needs the GIL.
 *
 *   data_section(ranges, reserve) -> (body, [(stream_id, start, end, position, length)])
 *
 * ``ranges`` is a sequence of sequences of StreamBatch (``stream_id``,
 * ``base_offset``, ``count``, ``payload``); empty ranges are skipped. Each
 * range must hold contiguous batches of one stream (ValueError otherwise).
 * ``body`` is a bytearray of the data section followed by ``reserve``
 * bytes left for the caller (the index and footer).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

/* --- CRC32C (Castagnoli), as the crc32c package computes it ------------- */

static uint32_t crc_table[8][256];

static void crc_init_table(void) {
    for (uint32_t i = 0; i < 256; i++) {
        uint32_t c = i;
        for (int k = 0; k < 8; k++)
            c = (c & 1) ? (c >> 1) ^ 0x82F63B78u : c >> 1;
        crc_table[0][i] = c;
    }
    for (uint32_t i = 0; i < 256; i++)
        for (int t = 1; t < 8; t++)
            crc_table[t][i] = (crc_table[t - 1][i] >> 8) ^ crc_table[0][crc_table[t - 1][i] & 0xff];
}

/* slicing by 8: the fallback where the CPU has no CRC32C instruction */
static uint32_t crc_update_sw(uint32_t crc, const unsigned char *p, size_t n) {
    while (n && ((uintptr_t)p & 7)) {
        crc = (crc >> 8) ^ crc_table[0][(crc ^ *p++) & 0xff];
        n--;
    }
    while (n >= 8) {
        uint64_t w;
        memcpy(&w, p, 8);
#if __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
        w = __builtin_bswap64(w);
#endif
        w ^= crc;
        crc = crc_table[7][w & 0xff] ^ crc_table[6][(w >> 8) & 0xff] ^
              crc_table[5][(w >> 16) & 0xff] ^ crc_table[4][(w >> 24) & 0xff] ^
              crc_table[3][(w >> 32) & 0xff] ^ crc_table[2][(w >> 40) & 0xff] ^
              crc_table[1][(w >> 48) & 0xff] ^ crc_table[0][w >> 56];
        p += 8;
        n -= 8;
    }
    while (n--)
        crc = (crc >> 8) ^ crc_table[0][(crc ^ *p++) & 0xff];
    return crc;
}

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define HAVE_HW_CRC 1
__attribute__((target("sse4.2"))) static uint32_t crc_update_hw(uint32_t crc,
                                                                const unsigned char *p, size_t n) {
    uint64_t c = crc;
    while (n && ((uintptr_t)p & 7)) {
        c = __builtin_ia32_crc32qi((uint32_t)c, *p++);
        n--;
    }
    while (n >= 8) {
        uint64_t w;
        memcpy(&w, p, 8);
        c = __builtin_ia32_crc32di(c, w);
        p += 8;
        n -= 8;
    }
    while (n--)
        c = __builtin_ia32_crc32qi((uint32_t)c, *p++);
    return (uint32_t)c;
}
#endif

static int use_hw_crc = 0;

static uint32_t crc_update(uint32_t crc, const unsigned char *p, size_t n) {
#ifdef HAVE_HW_CRC
    if (use_hw_crc)
        return crc_update_hw(crc, p, n);
#endif
    return crc_update_sw(crc, p, n);
}

static uint32_t crc32c_value(const unsigned char *p, size_t n) {
    return ~crc_update(0xFFFFFFFFu, p, n);
}

static PyObject *crc32c_py(PyObject *self, PyObject *args) {
    Py_buffer b;
    int software = 0;
    if (!PyArg_ParseTuple(args, "y*|p", &b, &software))
        return NULL;
    uint32_t c = software ? ~crc_update_sw(0xFFFFFFFFu, (const unsigned char *)b.buf, (size_t)b.len)
                          : crc32c_value((const unsigned char *)b.buf, (size_t)b.len);
    PyBuffer_Release(&b);
    return PyLong_FromUnsignedLong(c);
}

/* --- the data section ---------------------------------------------------- */

#define BATCH_HEADER 20 /* i64 base_offset | i32 count | u32 length | u32 crc32c */

typedef struct {
    int64_t base;
    int32_t count;
    Py_buffer payload;
} Item;

static void put_le(unsigned char *p, uint64_t v, int n) {
    for (int i = 0; i < n; i++)
        p[i] = (unsigned char)(v >> (8 * i));
}

static int attr_i64(PyObject *o, PyObject *name, int64_t *out) {
    PyObject *v = PyObject_GetAttr(o, name);
    if (v == NULL)
        return -1;
    long long x = PyLong_AsLongLong(v);
    Py_DECREF(v);
    if (x == -1 && PyErr_Occurred())
        return -1;
    *out = (int64_t)x;
    return 0;
}

static PyObject *s_stream_id, *s_base_offset, *s_count, *s_payload;

static PyObject *data_section(PyObject *self, PyObject *args) {
    PyObject *ranges;
    Py_ssize_t reserve;
    if (!PyArg_ParseTuple(args, "On", &ranges, &reserve))
        return NULL;
    if (reserve < 0) {
        PyErr_SetString(PyExc_ValueError, "reserve must not be negative");
        return NULL;
    }
    PyObject *outer = PySequence_Fast(ranges, "ranges must be a sequence");
    if (outer == NULL)
        return NULL;
    Py_ssize_t n_ranges = PySequence_Fast_GET_SIZE(outer);
    Py_ssize_t n_items = 0, cap = 0;
    Item *items = NULL;
    PyObject *index = PyList_New(0);
    PyObject *body = NULL;
    /* per range: (first item, item count, stream id, start, end) */
    typedef struct {
        Py_ssize_t first, n;
        int64_t sid, start, end;
    } Range;
    Range *rs = PyMem_Calloc(n_ranges ? (size_t)n_ranges : 1, sizeof(Range));
    Py_ssize_t n_rs = 0;
    size_t total = 0;
    if (index == NULL || rs == NULL) {
        PyErr_NoMemory();
        goto fail;
    }
    for (Py_ssize_t r = 0; r < n_ranges; r++) {
        PyObject *inner = PySequence_Fast(PySequence_Fast_GET_ITEM(outer, r),
                                          "each range must be a sequence of batches");
        if (inner == NULL)
            goto fail;
        Py_ssize_t nb = PySequence_Fast_GET_SIZE(inner);
        if (nb == 0) {
            Py_DECREF(inner);
            continue;
        }
        Range *rg = &rs[n_rs];
        rg->first = n_items;
        rg->n = 0;
        for (Py_ssize_t i = 0; i < nb; i++) {
            PyObject *b = PySequence_Fast_GET_ITEM(inner, i);
            int64_t sid, base, count;
            if (attr_i64(b, s_stream_id, &sid) < 0 || attr_i64(b, s_base_offset, &base) < 0 ||
                attr_i64(b, s_count, &count) < 0) {
                Py_DECREF(inner);
                goto fail;
            }
            if (i == 0) {
                rg->sid = sid;
                rg->start = base;
                rg->end = base;
            }
            if (sid != rg->sid || base != rg->end) {
                Py_DECREF(inner);
                PyErr_SetString(PyExc_ValueError,
                                "a range must hold contiguous batches of one stream");
                goto fail;
            }
            if (count < INT32_MIN || count > INT32_MAX) {
                Py_DECREF(inner);
                PyErr_SetString(PyExc_OverflowError, "a batch's count does not fit an int32");
                goto fail;
            }
            if (n_items == cap) {
                Py_ssize_t ncap = cap ? cap * 2 : 256;
                Item *grown = PyMem_Realloc(items, (size_t)ncap * sizeof(Item));
                if (grown == NULL) {
                    Py_DECREF(inner);
                    PyErr_NoMemory();
                    goto fail;
                }
                items = grown;
                cap = ncap;
            }
            PyObject *payload = PyObject_GetAttr(b, s_payload);
            if (payload == NULL) {
                Py_DECREF(inner);
                goto fail;
            }
            int got = PyObject_GetBuffer(payload, &items[n_items].payload, PyBUF_SIMPLE);
            Py_DECREF(payload);
            if (got < 0) {
                Py_DECREF(inner);
                goto fail;
            }
            if ((uint64_t)items[n_items].payload.len > UINT32_MAX) {
                PyBuffer_Release(&items[n_items].payload);
                Py_DECREF(inner);
                PyErr_SetString(PyExc_OverflowError, "a batch of 4 GiB or more");
                goto fail;
            }
            items[n_items].base = base;
            items[n_items].count = (int32_t)count;
            n_items++;
            rg->n++;
            rg->end = base + count;
            total += BATCH_HEADER + (size_t)items[n_items - 1].payload.len;
        }
        Py_DECREF(inner);
        n_rs++;
    }
    if (total + (size_t)reserve > (size_t)PY_SSIZE_T_MAX) {
        PyErr_SetString(PyExc_OverflowError, "the object is too large");
        goto fail;
    }
    body = PyByteArray_FromStringAndSize(NULL, (Py_ssize_t)(total + (size_t)reserve));
    if (body == NULL)
        goto fail;
    unsigned char *out = (unsigned char *)PyByteArray_AS_STRING(body);
    Py_BEGIN_ALLOW_THREADS
    unsigned char *p = out;
    for (Py_ssize_t i = 0; i < n_items; i++) {
        Item *it = &items[i];
        uint32_t len = (uint32_t)it->payload.len;
        put_le(p, (uint64_t)it->base, 8);
        put_le(p + 8, (uint64_t)(uint32_t)it->count, 4);
        put_le(p + 12, len, 4);
        uint32_t c = crc_update(0xFFFFFFFFu, p, 16);
        c = ~crc_update(c, (const unsigned char *)it->payload.buf, len);
        put_le(p + 16, c, 4);
        memcpy(p + BATCH_HEADER, it->payload.buf, len);
        p += BATCH_HEADER + len;
    }
    memset(p, 0, (size_t)reserve);
    Py_END_ALLOW_THREADS
    size_t pos = 0;
    for (Py_ssize_t r = 0; r < n_rs; r++) {
        size_t start = pos;
        for (Py_ssize_t i = rs[r].first; i < rs[r].first + rs[r].n; i++)
            pos += BATCH_HEADER + (size_t)items[i].payload.len;
        PyObject *e = Py_BuildValue("(LLLnn)", (long long)rs[r].sid, (long long)rs[r].start,
                                    (long long)rs[r].end, (Py_ssize_t)start,
                                    (Py_ssize_t)(pos - start));
        if (e == NULL || PyList_Append(index, e) < 0) {
            Py_XDECREF(e);
            goto fail;
        }
        Py_DECREF(e);
    }
    for (Py_ssize_t i = 0; i < n_items; i++)
        PyBuffer_Release(&items[i].payload);
    PyMem_Free(items);
    PyMem_Free(rs);
    Py_DECREF(outer);
    PyObject *result = PyTuple_Pack(2, body, index);
    Py_DECREF(body);
    Py_DECREF(index);
    return result;
fail:
    for (Py_ssize_t i = 0; i < n_items; i++)
        PyBuffer_Release(&items[i].payload);
    PyMem_Free(items);
    PyMem_Free(rs);
    Py_XDECREF(body);
    Py_XDECREF(index);
    Py_DECREF(outer);
    return NULL;
}

static PyMethodDef methods[] = {
    {"data_section", data_section, METH_VARARGS,
     "data_section(ranges, reserve) -> (bytearray, [(stream_id, start, end, position, length)])"},
    {"crc32c", crc32c_py, METH_VARARGS, "crc32c(data, software=False) -> int: this module's CRC (its table fallback with software), for tests"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_objencode", "A stream set object's data section, in C.", -1,
    methods,
};

PyMODINIT_FUNC PyInit__objencode(void) {
    crc_init_table();
#ifdef HAVE_HW_CRC
    __builtin_cpu_init();
    use_hw_crc = __builtin_cpu_supports("sse4.2");
#endif
    s_stream_id = PyUnicode_InternFromString("stream_id");
    s_base_offset = PyUnicode_InternFromString("base_offset");
    s_count = PyUnicode_InternFromString("count");
    s_payload = PyUnicode_InternFromString("payload");
    if (!s_stream_id || !s_base_offset || !s_count || !s_payload)
        return NULL;
    return PyModule_Create(&module);
}
