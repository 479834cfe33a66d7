/*
 * Record walks that run for every record, in C: the produce path's check
 * (scan), and the table topic fast path's record boundaries (starts), record
 * fields (fields) and byte gathering (gather).
 *
 * Before a batch is appended, every record of it is read (Kafka does the
 * same): lengths must chain to the end of the batch, offset deltas must be
 * 0, 1, 2..., and the timestamps' minimum and maximum are needed. In Python
 * that walk costs about 0.9 us per record, which was half of the broker's CPU
 * per produced gigabyte (bench/produce_peer_bench.py); here it is a few ns.
 *
 * scan() only ever says "these records are fine, here is what they hold" or
 * "not sure": on anything unusual (a malformed record, a varint past 64 bits,
 * a count that does not match) it returns None and the caller runs the
 * pure-Python walk in ingest/protocol/records.py, which decides and words the
 * error. So this file never has to reproduce an error message, and a batch
 * it accepts is one the Python walk accepts with the same result
 * (tests/unit/protocol/test_record_scan.py checks both on generated input).
 *
 * scan(data, pos, index, count, base_ts, lo, hi)
 *     Walks the whole records that start at data[pos:], record number
 *     ``index`` onward, at most up to record ``count - 1``. A record cut off
 *     by the end of ``data`` is left for the next call (the caller appends
 *     the next inflated chunk). Every record is parsed field by field
 *     (lengths, attributes, deltas, key, value, headers). Returns
 *     (pos, index, lo, hi, null_keys) after the last whole record, where
 *     null_keys counts records without a key, or None.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

/* a zig-zag varint of at most 64 bits; 0 on success, 1 when cut off by
 * ``end``, -1 when malformed (longer than 10 bytes or past 64 bits) */
static int read_varint(const unsigned char *buf, Py_ssize_t end, Py_ssize_t *pos, int64_t *out) {
    uint64_t result = 0;
    int shift = 0;
    Py_ssize_t p = *pos;
    for (;;) {
        if (p >= end)
            return 1;
        unsigned char b = buf[p++];
        if (shift == 63 && (b & 0x7E))
            return -1; /* bits past 64: the Python walk decides */
        result |= (uint64_t)(b & 0x7F) << shift;
        if (!(b & 0x80))
            break;
        shift += 7;
        if (shift > 63)
            return -1;
    }
    *pos = p;
    *out = (int64_t)(result >> 1) ^ -(int64_t)(result & 1);
    return 0;
}

/* skip a length-prefixed field (key, value, header key or value) that must
 * end at or before ``end``; ``nullable`` allows -1; 0 ok, -1 not */
static int skip_field(const unsigned char *buf, Py_ssize_t end, Py_ssize_t *pos, int nullable,
                      int64_t *length) {
    int64_t n;
    if (read_varint(buf, end, pos, &n) != 0)
        return -1;
    *length = n;
    if (n == -1 && nullable)
        return 0;
    if (n < 0 || n > end - *pos)
        return -1;
    *pos += (Py_ssize_t)n;
    return 0;
}

static PyObject *scan(PyObject *self, PyObject *args) {
    Py_buffer view;
    Py_ssize_t pos;
    long long index, count, base_ts, lo, hi;
    if (!PyArg_ParseTuple(args, "y*nLLLLL", &view, &pos, &index, &count, &base_ts, &lo, &hi))
        return NULL;
    const unsigned char *buf = (const unsigned char *)view.buf;
    const Py_ssize_t size = view.len;
    long long null_keys = 0;
    int bad = 0;
    if (pos < 0 || pos > size || index < 0 || count < 0)
        bad = 1;
    Py_BEGIN_ALLOW_THREADS
    while (!bad && index < count) {
        Py_ssize_t p = pos;
        int64_t length, ts_delta, off_delta, n;
        int r = read_varint(buf, size, &p, &length);
        if (r == 1)
            break; /* the length itself is cut off: wait for more */
        if (r < 0 || length <= 0) {
            bad = 1;
            break;
        }
        if (length > size - p)
            break; /* the record is cut off: wait for more */
        const Py_ssize_t end = p + (Py_ssize_t)length;
        p += 1; /* attributes */
        if (p > end || read_varint(buf, end, &p, &ts_delta) != 0 ||
            read_varint(buf, end, &p, &off_delta) != 0 || off_delta != index) {
            bad = 1;
            break;
        }
        /* the Python walk keeps timestamps as exact integers: stay well
         * inside 64 bits, or let it decide */
        if (ts_delta > INT64_MAX / 4 || ts_delta < INT64_MIN / 4 || base_ts > INT64_MAX / 4 ||
            base_ts < INT64_MIN / 4) {
            bad = 1;
            break;
        }
        const long long ts = base_ts + ts_delta;
        if (index == 0) {
            lo = hi = ts;
        } else if (ts > hi) {
            hi = ts;
        } else if (ts < lo) {
            lo = ts;
        }
        if (skip_field(buf, end, &p, 1, &n) != 0) { /* key */
            bad = 1;
            break;
        }
        if (n == -1)
            null_keys++;
        if (skip_field(buf, end, &p, 1, &n) != 0) { /* value */
            bad = 1;
            break;
        }
        int64_t headers;
        if (read_varint(buf, end, &p, &headers) != 0 || headers < 0) {
            bad = 1;
            break;
        }
        for (int64_t h = 0; h < headers && !bad; h++) {
            if (skip_field(buf, end, &p, 0, &n) != 0 || skip_field(buf, end, &p, 1, &n) != 0)
                bad = 1;
        }
        if (bad || p != end) {
            bad = 1;
            break;
        }
        pos = end;
        index++;
    }
    Py_END_ALLOW_THREADS
    PyBuffer_Release(&view);
    if (bad)
        Py_RETURN_NONE;
    return Py_BuildValue("(nLLLL)", pos, index, lo, hi, null_keys);
}

/* starts(data, count) -> bytes: the int64 start of each of ``count``
 * length-prefixed records that must exactly fill ``data`` (a table topic
 * chunk's decompressed records). ValueError names what is wrong. */
static PyObject *starts(PyObject *self, PyObject *args) {
    Py_buffer view;
    Py_ssize_t count;
    if (!PyArg_ParseTuple(args, "y*n", &view, &count))
        return NULL;
    if (count < 0) {
        PyBuffer_Release(&view);
        PyErr_SetString(PyExc_ValueError, "negative record count");
        return NULL;
    }
    PyObject *out = PyBytes_FromStringAndSize(NULL, count * (Py_ssize_t)sizeof(int64_t));
    if (out == NULL) {
        PyBuffer_Release(&view);
        return NULL;
    }
    int64_t *dst = (int64_t *)PyBytes_AS_STRING(out);
    const unsigned char *buf = (const unsigned char *)view.buf;
    Py_ssize_t pos = 0;
    const char *error = NULL;
    for (Py_ssize_t i = 0; i < count; i++) {
        dst[i] = pos;
        int64_t length;
        int r = read_varint(buf, view.len, &pos, &length);
        if (r != 0) {
            error = r > 0 ? "record truncated" : "varint too long";
            break;
        }
        if (length < 0 || length > view.len - pos) {
            error = "record batch length mismatch";
            break;
        }
        pos += (Py_ssize_t)length;
    }
    if (error == NULL && pos != view.len)
        error = "record batch length mismatch";
    PyBuffer_Release(&view);
    if (error != NULL) {
        Py_DECREF(out);
        PyErr_SetString(PyExc_ValueError, error);
        return NULL;
    }
    return out;
}

/* gather(data, starts, lengths) -> bytes: data[starts[i]:starts[i]+lengths[i]]
 * for every i, concatenated; starts and lengths are int64 buffers. */
static PyObject *gather(PyObject *self, PyObject *args) {
    Py_buffer data, st, ln;
    if (!PyArg_ParseTuple(args, "y*y*y*", &data, &st, &ln))
        return NULL;
    PyObject *out = NULL;
    const char *error = NULL;
    Py_ssize_t n = st.len / (Py_ssize_t)sizeof(int64_t);
    if (st.len != ln.len || st.len % (Py_ssize_t)sizeof(int64_t) != 0) {
        error = "starts and lengths must be int64 arrays of one length";
        goto done;
    }
    const int64_t *s = (const int64_t *)st.buf;
    const int64_t *l = (const int64_t *)ln.buf;
    Py_ssize_t total = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        if (s[i] < 0 || l[i] < 0 || s[i] > data.len || l[i] > data.len - s[i]) {
            error = "a range lies outside the data";
            goto done;
        }
        total += (Py_ssize_t)l[i];
    }
    out = PyBytes_FromStringAndSize(NULL, total);
    if (out == NULL)
        goto done;
    char *dst = PyBytes_AS_STRING(out);
    const char *src = (const char *)data.buf;
    for (Py_ssize_t i = 0; i < n; i++) {
        memcpy(dst, src + s[i], (size_t)l[i]);
        dst += l[i];
    }
done:
    PyBuffer_Release(&data);
    PyBuffer_Release(&st);
    PyBuffer_Release(&ln);
    if (error != NULL) {
        PyErr_SetString(PyExc_ValueError, error);
        return NULL;
    }
    return out;
}

/* fields(data, starts) -> bytes | None: for the records that start at the
 * int64 positions ``starts`` of ``data`` (as starts() found them), six int64
 * columns one after another: timestamp delta, offset delta, key length, key
 * start, value length, value start. None, and the caller's numpy walk
 * decides, for anything but a plain record: a malformed varint, a field
 * past its record, a null value, headers, a record longer than it says. */
static PyObject *fields(PyObject *self, PyObject *args) {
    Py_buffer data, st;
    if (!PyArg_ParseTuple(args, "y*y*", &data, &st))
        return NULL;
    if (st.len % (Py_ssize_t)sizeof(int64_t) != 0) {
        PyBuffer_Release(&data);
        PyBuffer_Release(&st);
        PyErr_SetString(PyExc_ValueError, "starts must be an int64 array");
        return NULL;
    }
    const Py_ssize_t n = st.len / (Py_ssize_t)sizeof(int64_t);
    PyObject *out = PyBytes_FromStringAndSize(NULL, 6 * n * (Py_ssize_t)sizeof(int64_t));
    if (out == NULL) {
        PyBuffer_Release(&data);
        PyBuffer_Release(&st);
        return NULL;
    }
    int64_t *ts = (int64_t *)PyBytes_AS_STRING(out);
    int64_t *off = ts + n, *klen = ts + 2 * n, *kstart = ts + 3 * n;
    int64_t *vlen = ts + 4 * n, *vstart = ts + 5 * n;
    const unsigned char *buf = (const unsigned char *)data.buf;
    const int64_t *s = (const int64_t *)st.buf;
    int bad = 0;
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t i = 0; i < n && !bad; i++) {
        int64_t length, headers;
        if (s[i] < 0 || s[i] >= data.len) {
            bad = 1;
            break;
        }
        Py_ssize_t p = (Py_ssize_t)s[i];
        if (read_varint(buf, data.len, &p, &length) != 0 || length <= 0 ||
            length > data.len - p) {
            bad = 1;
            break;
        }
        const Py_ssize_t end = p + (Py_ssize_t)length;
        p += 1; /* attributes */
        if (read_varint(buf, end, &p, &ts[i]) != 0 || read_varint(buf, end, &p, &off[i]) != 0) {
            bad = 1;
            break;
        }
        if (skip_field(buf, end, &p, 1, &klen[i]) != 0) {
            bad = 1;
            break;
        }
        kstart[i] = klen[i] < 0 ? (int64_t)p : (int64_t)(p - (Py_ssize_t)klen[i]);
        if (skip_field(buf, end, &p, 0, &vlen[i]) != 0) {
            bad = 1;
            break;
        }
        vstart[i] = (int64_t)(p - (Py_ssize_t)vlen[i]);
        if (read_varint(buf, end, &p, &headers) != 0 || headers != 0 || p != end)
            bad = 1;
    }
    Py_END_ALLOW_THREADS
    PyBuffer_Release(&data);
    PyBuffer_Release(&st);
    if (bad) {
        Py_DECREF(out);
        Py_RETURN_NONE;
    }
    return out;
}

/* varint_sizes(values, out, zigzag): for each int64 of ``values``, the bytes
 * of its Avro/protobuf varint encoding (zigzag first when ``zigzag``, else
 * the value read as unsigned), written as int64 into ``out`` (writable, the
 * same length). What an Avro encoder writes for a long or a length: the
 * bulk decoder's check that every body was read to its end (numpy's
 * searchsorted does it at about 7 ns a value; this at about 1). */
static PyObject *varint_sizes(PyObject *self, PyObject *args) {
    Py_buffer in, out;
    int zigzag;
    if (!PyArg_ParseTuple(args, "y*w*p", &in, &out, &zigzag))
        return NULL;
    if (in.len % (Py_ssize_t)sizeof(int64_t) != 0 || out.len != in.len) {
        PyBuffer_Release(&in);
        PyBuffer_Release(&out);
        PyErr_SetString(PyExc_ValueError, "values and out must be int64 arrays of one length");
        return NULL;
    }
    const Py_ssize_t n = in.len / (Py_ssize_t)sizeof(int64_t);
    const int64_t *v = (const int64_t *)in.buf;
    int64_t *o = (int64_t *)out.buf;
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t i = 0; i < n; i++) {
        uint64_t z = zigzag ? ((uint64_t)v[i] << 1) ^ (uint64_t)(v[i] >> 63) : (uint64_t)v[i];
        int bits = 64 - __builtin_clzll(z | 1);
        o[i] = (bits + 6) / 7;
    }
    Py_END_ALLOW_THREADS
    PyBuffer_Release(&in);
    PyBuffer_Release(&out);
    Py_RETURN_NONE;
}

static PyMethodDef methods[] = {
    {"scan", scan, METH_VARARGS,
     "scan(data, pos, index, count, base_ts, lo, hi) -> (pos, index, lo, hi, null_keys) | None"},
    {"starts", starts, METH_VARARGS, "starts(data, count) -> bytes of int64 record starts"},
    {"gather", gather, METH_VARARGS, "gather(data, starts, lengths) -> bytes"},
    {"fields", fields, METH_VARARGS, "fields(data, starts) -> bytes of six int64 columns | None"},
    {"varint_sizes", varint_sizes, METH_VARARGS,
     "varint_sizes(values, out, zigzag) -> None: each int64's varint length into out"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_recordscan", "Record walks that run for every record, in C.", -1, methods,
};

PyMODINIT_FUNC PyInit__recordscan(void) { return PyModule_Create(&module); }
