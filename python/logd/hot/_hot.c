/* The Python client's hot path in C (issue 39): Run.log() of a row with the same names as the last one, all of
 * them numbers, into the crash journal, in one call with no Python frame of its own.
 *
 * What it does is exactly what the pure-Python path does for that case (logd/run.py Run.log, logd/spool/segments.py
 * OpenSegments.add, logd/spool/journal.py Journal.row): the same ROW record at the same place, the same commit order,
 * the same state after it. Anything else (another set of names, a value that is not a float or an int, an int
 * beyond a double, a media value or device tensor waiting, DDP timings to merge, a journal near the end of its
 * ring or its batch, the writer's lock held, no journal) makes it return False having changed nothing, and the
 * Python path does the row. So the Python path stays the reference and the only one for every rare case.
 *
 * Journal (journal.py) derives from Ring when this module loads: the fields the row touches are C members of the
 * object (read and written by journal.py as ordinary attributes), so this path reads them without a lookup.
 * Built against the stable ABI (Py_LIMITED_API 3.8): one build serves every CPython 3 from 3.8. Loaded by
 * logd/hot/__init__.py; LOGD_PURE_PYTHON=1 keeps it off. */
#ifndef Py_LIMITED_API
#define Py_LIMITED_API 0x03080000
#endif
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <structmember.h>
#include <stdint.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <pthread.h>
#include <stdio.h>

typedef struct {
    PyObject_HEAD
    Py_ssize_t off;        /* _off: where the tail is in the file */
    Py_ssize_t tail;       /* _tail: the logical ring position past the last record */
    Py_ssize_t fast_end;   /* _fast_end, _fast_limit: the common case's bounds (journal.py _refresh) */
    Py_ssize_t fast_limit;
    Py_ssize_t ring;       /* _ring, _ring_off: the ring's size and where it starts in the file */
    Py_ssize_t ring_off;
    Py_ssize_t rows_total; /* rows_total */
    Py_ssize_t base;       /* _base: the mapping's address; 0 when unmapped (close() clears it first) */
    Py_ssize_t size;       /* _map_size: the mapping's length */
    PyObject *last_keys;   /* _last_keys: the names of the last row journaled (a list) */
    PyObject *last;        /* _last: their layout (struct, length, header, ids bytes, where the values start) */
} Ring;

static PyMemberDef ring_members[] = {
    {"_off", T_PYSSIZET, offsetof(Ring, off), 0, NULL},
    {"_tail", T_PYSSIZET, offsetof(Ring, tail), 0, NULL},
    {"_fast_end", T_PYSSIZET, offsetof(Ring, fast_end), 0, NULL},
    {"_fast_limit", T_PYSSIZET, offsetof(Ring, fast_limit), 0, NULL},
    {"_ring", T_PYSSIZET, offsetof(Ring, ring), 0, NULL},
    {"_ring_off", T_PYSSIZET, offsetof(Ring, ring_off), 0, NULL},
    {"rows_total", T_PYSSIZET, offsetof(Ring, rows_total), 0, NULL},
    {"_base", T_PYSSIZET, offsetof(Ring, base), 0, NULL},
    {"_map_size", T_PYSSIZET, offsetof(Ring, size), 0, NULL},
    {"_last_keys", T_OBJECT, offsetof(Ring, last_keys), 0, NULL},
    {"_last", T_OBJECT, offsetof(Ring, last), 0, NULL},
    {NULL, 0, 0, 0, NULL},
};

/* Frees an instance of one of this module's heap types (or of a Python subclass) once its members are cleared. */
static void free_instance(PyObject *self) {
    PyTypeObject *tp = Py_TYPE(self);
    freefunc free = (freefunc)PyType_GetSlot(tp, Py_tp_free);
    free(self);
    Py_DECREF(tp);
}

static void ring_dealloc(PyObject *self) {
    Ring *r = (Ring *)self;
    Py_CLEAR(r->last_keys);
    Py_CLEAR(r->last);
    free_instance(self);
}

static PyType_Slot ring_slots[] = {
    {Py_tp_members, ring_members},
    {Py_tp_dealloc, (void *)ring_dealloc},
    {Py_tp_doc, (void *)"The crash journal's ring state that the hot path reads and writes (logd/spool/journal.py's base)."},
    {0, NULL},
};

static PyType_Spec ring_spec = {"logd.hot._hot.Ring", sizeof(Ring), 0, Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE, ring_slots};

static PyTypeObject *RingType;

/* The run's and the writer's fields that log() reads and writes, as C members (run.py's Run and spool/segments.py's
 * OpenSegments derive from these): the hot path reads them without a dictionary lookup each. Python code uses them as
 * plain attributes; an unset one reads as absent (AttributeError), and the hot path then hands the row back. */
typedef struct {
    PyObject_HEAD
    PyObject *finished, *flat_keys, *ddp_watch, *row_media, *row_device, *device_queue, *next_step, *writer, *pid;
} RunB;

typedef struct {
    PyObject_HEAD
    PyObject *pid, *journal, *ring_to, *steps_given, *buf_lock, *buf_locked;
} WriterB;

static PyMemberDef runb_members[] = {
    {"_finished", T_OBJECT_EX, offsetof(RunB, finished), 0, NULL},
    {"_flat_keys", T_OBJECT_EX, offsetof(RunB, flat_keys), 0, NULL},
    {"_ddp_watch", T_OBJECT_EX, offsetof(RunB, ddp_watch), 0, NULL},
    {"_row_media", T_OBJECT_EX, offsetof(RunB, row_media), 0, NULL},
    {"_row_device", T_OBJECT_EX, offsetof(RunB, row_device), 0, NULL},
    {"_device_queue", T_OBJECT_EX, offsetof(RunB, device_queue), 0, NULL},
    {"_next_step", T_OBJECT_EX, offsetof(RunB, next_step), 0, NULL},
    {"_writer", T_OBJECT_EX, offsetof(RunB, writer), 0, NULL},
    {"_pid", T_OBJECT_EX, offsetof(RunB, pid), 0, NULL},
    {NULL, 0, 0, 0, NULL},
};

static PyMemberDef writerb_members[] = {
    {"pid", T_OBJECT_EX, offsetof(WriterB, pid), 0, NULL},
    {"journal", T_OBJECT_EX, offsetof(WriterB, journal), 0, NULL},
    {"_ring_to", T_OBJECT_EX, offsetof(WriterB, ring_to), 0, NULL},
    {"steps_given", T_OBJECT_EX, offsetof(WriterB, steps_given), 0, NULL},
    {"_buf_lock", T_OBJECT_EX, offsetof(WriterB, buf_lock), 0, NULL},
    {"_buf_locked", T_OBJECT_EX, offsetof(WriterB, buf_locked), 0, NULL},
    {NULL, 0, 0, 0, NULL},
};

static int runb_traverse(PyObject *self, visitproc visit, void *arg) {
    RunB *r = (RunB *)self;
    Py_VISIT(Py_TYPE(self));
    Py_VISIT(r->finished);
    Py_VISIT(r->flat_keys);
    Py_VISIT(r->ddp_watch);
    Py_VISIT(r->row_media);
    Py_VISIT(r->row_device);
    Py_VISIT(r->device_queue);
    Py_VISIT(r->next_step);
    Py_VISIT(r->writer);
    Py_VISIT(r->pid);
    return 0;
}

static int runb_clear(PyObject *self) {
    RunB *r = (RunB *)self;
    Py_CLEAR(r->finished);
    Py_CLEAR(r->flat_keys);
    Py_CLEAR(r->ddp_watch);
    Py_CLEAR(r->row_media);
    Py_CLEAR(r->row_device);
    Py_CLEAR(r->device_queue);
    Py_CLEAR(r->next_step);
    Py_CLEAR(r->writer);
    Py_CLEAR(r->pid);
    return 0;
}

static void runb_dealloc(PyObject *self) {
    PyObject_GC_UnTrack(self);
    runb_clear(self);
    free_instance(self);
}

static int writerb_traverse(PyObject *self, visitproc visit, void *arg) {
    WriterB *w = (WriterB *)self;
    Py_VISIT(Py_TYPE(self));
    Py_VISIT(w->pid);
    Py_VISIT(w->journal);
    Py_VISIT(w->ring_to);
    Py_VISIT(w->steps_given);
    Py_VISIT(w->buf_lock);
    Py_VISIT(w->buf_locked);
    return 0;
}

static int writerb_clear(PyObject *self) {
    WriterB *w = (WriterB *)self;
    Py_CLEAR(w->pid);
    Py_CLEAR(w->journal);
    Py_CLEAR(w->ring_to);
    Py_CLEAR(w->steps_given);
    Py_CLEAR(w->buf_lock);
    Py_CLEAR(w->buf_locked);
    return 0;
}

static void writerb_dealloc(PyObject *self) {
    PyObject_GC_UnTrack(self);
    writerb_clear(self);
    free_instance(self);
}

static PyTypeObject *RunBType, *WriterBType;

/* CRC-32 (IEEE 802.3, reflected, as zlib.crc32), slicing by 8. */
static uint32_t crc_table[8][256];

static void crc_init(void) {
    for (uint32_t i = 0; i < 256; i++) {
        uint32_t c = i;
        for (int k = 0; k < 8; k++) c = c & 1 ? 0xEDB88320u ^ (c >> 1) : c >> 1;
        crc_table[0][i] = c;
    }
    for (uint32_t i = 0; i < 256; i++)
        for (int t = 1; t < 8; t++) crc_table[t][i] = (crc_table[t - 1][i] >> 8) ^ crc_table[0][crc_table[t - 1][i] & 0xFF];
}

static uint32_t crc32_of(const unsigned char *p, size_t n) {
    uint32_t c = 0xFFFFFFFFu;
    while (n >= 8) {
        uint32_t lo, hi;
        memcpy(&lo, p, 4);
        memcpy(&hi, p + 4, 4);
        lo ^= c;
        c = crc_table[7][lo & 0xFF] ^ crc_table[6][(lo >> 8) & 0xFF] ^ crc_table[5][(lo >> 16) & 0xFF] ^ crc_table[4][lo >> 24] ^
            crc_table[3][hi & 0xFF] ^ crc_table[2][(hi >> 8) & 0xFF] ^ crc_table[1][(hi >> 16) & 0xFF] ^ crc_table[0][hi >> 24];
        p += 8;
        n -= 8;
    }
    while (n--) c = crc_table[0][(c ^ *p++) & 0xFF] ^ (c >> 8);
    return c ^ 0xFFFFFFFFu;
}

/* Interned attribute names. */
static PyObject *s_finished, *s_flat_keys, *s_ddp_watch, *s_pending, *s_row_media, *s_row_device, *s_device_queue,
    *s_next_step, *s_writer, *s_pid, *s_wpid, *s_buf_lock, *s_locked, *s_journal, *s_ring_to, *s_steps_given;

/* Whether the writer's buffer lock is held: its bound `locked` when the writer keeps one (a call without a lookup
 * and a bound method made each time), else the lock's method. A new reference, or NULL with an error set. */
static PyObject *lock_held(WriterB *wb, PyObject *lock) {
    if (wb->buf_locked != NULL) return PyObject_CallFunctionObjArgs(wb->buf_locked, NULL);
    return PyObject_CallMethodObjArgs(lock, s_locked, NULL);
}

/* An attribute that must be present; NULL (the error cleared) otherwise. */
static PyObject *attr(PyObject *o, PyObject *name) {
    PyObject *v = PyObject_GetAttr(o, name);
    if (v == NULL) PyErr_Clear();
    return v;
}

/* JSON text as json's encode_basestring_ascii writes it (ASCII only; the escapes and hex digits its C encoder uses). */
static const char hexdigits[] = "0123456789abcdef";

static Py_ssize_t escaped_len(const Py_UCS4 *u, Py_ssize_t n) {
    Py_ssize_t k = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        Py_UCS4 c = u[i];
        if (c >= ' ' && c <= '~' && c != '\\' && c != '"') k += 1;
        else if (c == '\\' || c == '"' || c == '\b' || c == '\f' || c == '\n' || c == '\r' || c == '\t') k += 2;
        else if (c >= 0x10000) k += 12;
        else k += 6;
    }
    return k;
}

static unsigned char *put_u4(unsigned char *p, unsigned int c) {
    *p++ = '\\';
    *p++ = 'u';
    *p++ = hexdigits[(c >> 12) & 0xf];
    *p++ = hexdigits[(c >> 8) & 0xf];
    *p++ = hexdigits[(c >> 4) & 0xf];
    *p++ = hexdigits[c & 0xf];
    return p;
}

static unsigned char *escape(unsigned char *p, const Py_UCS4 *u, Py_ssize_t n) {
    for (Py_ssize_t i = 0; i < n; i++) {
        Py_UCS4 c = u[i];
        if (c >= ' ' && c <= '~' && c != '\\' && c != '"') {
            *p++ = (unsigned char)c;
            continue;
        }
        switch (c) {
        case '\\': *p++ = '\\'; *p++ = '\\'; break;
        case '"': *p++ = '\\'; *p++ = '"'; break;
        case '\b': *p++ = '\\'; *p++ = 'b'; break;
        case '\f': *p++ = '\\'; *p++ = 'f'; break;
        case '\n': *p++ = '\\'; *p++ = 'n'; break;
        case '\r': *p++ = '\\'; *p++ = 'r'; break;
        case '\t': *p++ = '\\'; *p++ = 't'; break;
        default:
            if (c >= 0x10000) {
                Py_UCS4 v = c - 0x10000;
                p = put_u4(p, 0xd800 | ((v >> 10) & 0x3ff));
                p = put_u4(p, 0xdc00 | (v & 0x3ff));
            } else {
                p = put_u4(p, c);
            }
        }
    }
    return p;
}

/* Bytes [8, length) of the record at r->off are written: the terminator, then len and check in one store, and the
 * ring's tail moves on (journal.py Journal._commit). */
static void commit_record(Ring *r, Py_ssize_t length, Py_ssize_t noff, Py_ssize_t term) {
    unsigned char *rec = (unsigned char *)(uintptr_t)r->base + r->off;
    uint32_t check = crc32_of(rec + 8, (size_t)(length - 8));
    if (term >= 0) {
        uint32_t zero = 0;
        memcpy((unsigned char *)(uintptr_t)r->base + term, &zero, 4);
    }
    __atomic_store_n((uint64_t *)rec, (uint64_t)length | (uint64_t)check << 32, __ATOMIC_RELEASE);
    r->off = noff;
    r->tail += length;
}

/* Where a record of `length` bytes goes in the common case: its new off and terminator; 0 when it does not fit. */
static int place(Ring *r, Py_ssize_t length, Py_ssize_t *noff, Py_ssize_t *term) {
    Py_ssize_t off = r->off, tail = r->tail;
    if (r->base == 0 || off + length > r->fast_end || tail + length > r->fast_limit) return 0;
    Py_ssize_t ntail = tail + length;
    *term = -1;
    if (ntail < r->ring) *noff = off + length;
    else *noff = *term = r->ring_off + ntail % r->ring;
    if (off < 0 || off + length > r->size || (*term >= 0 && *term + 4 > r->size)) return 0;
    return 1;
}

#define STACK_VALUES 64

/* A member that must be set and falsy (an empty list or deque). */
static int member_falsy(PyObject *v) {
    if (v == NULL) return 0;
    int t = PyObject_IsTrue(v);
    if (t < 0) {
        PyErr_Clear();
        return 0;
    }
    return !t;
}

/* The row journaled here (run and journal updated as the Python path would): 1; nothing done, the Python path must
 * take the row: 0. Never raises. */
static int fast_log(RunB *run, PyObject *data, PyObject *stepo) {
    PyObject *flat = NULL, *w = NULL, *lock = NULL, *j = NULL, *o = NULL, *nexto = NULL;
    double stack_vals[STACK_VALUES];
    double *vals = stack_vals;
    int done = 0;

    if (!PyDict_CheckExact(data)) return 0;
    /* The run: not finished, nothing waiting to ride with this row. */
    if (run->finished != Py_None) return 0;
    if (!member_falsy(run->row_media) || !member_falsy(run->row_device) || !member_falsy(run->device_queue)) return 0;
    if (run->ddp_watch == NULL) return 0;
    if (run->ddp_watch != Py_None) {
        PyObject *p = attr(run->ddp_watch, s_pending);
        int pending = p == NULL || p != Py_None;
        Py_XDECREF(p);
        if (pending) return 0;
    }
    /* The names: the last flat row's, in the same order. */
    if (run->flat_keys == NULL || !PyList_CheckExact(run->flat_keys)) goto out;
    flat = run->flat_keys;
    Py_INCREF(flat);
    Py_ssize_t n = PyList_Size(flat);
    if (n <= 0 || n != PyDict_Size(data)) goto out;
    if (n > STACK_VALUES) {
        vals = (double *)PyMem_Malloc(sizeof(double) * (size_t)n);
        if (vals == NULL) {
            PyErr_Clear();
            vals = stack_vals;
            goto out;
        }
    }
    {
        Py_ssize_t pos = 0, i = 0;
        PyObject *k, *v;
        while (PyDict_Next(data, &pos, &k, &v)) {
            PyObject *want = PyList_GetItem(flat, i);
            if (want == NULL) {
                PyErr_Clear();
                goto out;
            }
            if (!PyUnicode_CheckExact(k)) goto out; /* a str subclass's __eq__ could run anything here */
            if (k != want) {
                int eq = PyObject_RichCompareBool(k, want, Py_EQ);
                if (eq != 1) {
                    if (eq < 0) PyErr_Clear();
                    goto out;
                }
            }
            if (PyFloat_Check(v)) {
                vals[i] = PyFloat_AsDouble(v);
            } else if (PyLong_CheckExact(v)) {
                vals[i] = PyLong_AsDouble(v);
                if (vals[i] == -1.0 && PyErr_Occurred()) { /* beyond a double: the Python path's rule */
                    PyErr_Clear();
                    goto out;
                }
            } else {
                goto out; /* bool, numpy's ints, None, text, a dict: the Python path */
            }
            i++;
        }
        if (i != n) goto out;
    }
    /* The step. */
    long long step;
    int given = stepo != Py_None;
    if (given) {
        if (!PyLong_CheckExact(stepo)) goto out;
        step = PyLong_AsLongLong(stepo);
        if (step == -1 && PyErr_Occurred()) {
            PyErr_Clear();
            goto out;
        }
        if (step < 0) goto out;
    } else {
        if (run->next_step == NULL || !PyLong_CheckExact(run->next_step)) goto out;
        step = PyLong_AsLongLong(run->next_step);
        if (step == -1 && PyErr_Occurred()) {
            PyErr_Clear();
            goto out;
        }
    }
    if (step >= (1LL << 53)) goto out; /* past a double's integers: the Python path */
    /* The writer: this process's, its lock free, its journal taking rows in order (no rows in memory ahead). */
    if (run->writer == NULL || !PyObject_TypeCheck(run->writer, WriterBType)) goto out;
    w = run->writer;
    Py_INCREF(w);
    WriterB *wb = (WriterB *)w;
    {
        PyObject *a = run->pid, *b = wb->pid;
        if (a == NULL || b == NULL || !PyLong_CheckExact(a) || !PyLong_CheckExact(b)) goto out;
        long pa = PyLong_AsLong(a), pb = PyLong_AsLong(b);
        if (PyErr_Occurred()) {
            PyErr_Clear();
            goto out;
        }
        if (pa != pb) goto out;
    }
    if ((lock = wb->buf_lock) == NULL) goto out;
    Py_INCREF(lock);
    {
        PyObject *held = lock_held(wb, lock);
        if (held == NULL) {
            PyErr_Clear();
            goto out;
        }
        int h = held != Py_False;
        Py_DECREF(held);
        if (h) goto out; /* the writer thread is between two steps of its own: the Python path waits for it */
    }
    if (wb->journal == NULL || !PyObject_TypeCheck(wb->journal, RingType)) goto out;
    j = wb->journal;
    Py_INCREF(j);
    if (wb->ring_to == NULL || !PyLong_CheckExact(wb->ring_to)) goto out;
    {
        long rt = PyLong_AsLong(wb->ring_to);
        if (PyErr_Occurred()) {
            PyErr_Clear();
            goto out;
        }
        if (rt >= 0) goto out; /* rows kept in memory ahead of the journal: the Python path keeps their order */
    }
    /* The journal: the same names as its last row, room at the tail (journal.py Journal.row's common case). */
    Ring *r = (Ring *)j;
    if (r->base == 0 || r->last_keys != flat || r->last == NULL || !PyTuple_Check(r->last) || PyTuple_Size(r->last) != 5) goto out;
    Py_ssize_t length = PyLong_AsSsize_t(PyTuple_GetItem(r->last, 1));
    unsigned long long hdr = PyLong_AsUnsignedLongLong(PyTuple_GetItem(r->last, 2));
    PyObject *idb = PyTuple_GetItem(r->last, 3);
    Py_ssize_t ids_end = PyLong_AsSsize_t(PyTuple_GetItem(r->last, 4));
    if (PyErr_Occurred()) {
        PyErr_Clear();
        goto out;
    }
    if (!PyBytes_Check(idb) || (hdr >> 32) != (unsigned long long)n) goto out;
    Py_ssize_t nidb = PyBytes_Size(idb);
    if (ids_end != 32 + nidb || length != ids_end + 8 * n) goto out;
    Py_ssize_t noff, term;
    if (!place(r, length, &noff, &term)) goto out;

    /* Bytes [8, len) of the record, then the terminator, then len and check in one store (journal.py). */
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    double t = (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
    unsigned char *rec = (unsigned char *)(uintptr_t)r->base + r->off;
    double stepd = (double)step;
    memcpy(rec + 8, &hdr, 8);
    memcpy(rec + 16, &stepd, 8);
    memcpy(rec + 24, &t, 8);
    memcpy(rec + 32, PyBytes_AsString(idb), (size_t)nidb);
    memcpy(rec + ids_end, vals, sizeof(double) * (size_t)n);
    commit_record(r, length, noff, term);
    r->rows_total += 1;
    done = 1;
    /* The run's side: the next step, and that steps are given (rank health judges the pace of given steps only). */
    if ((nexto = PyLong_FromLongLong(step + 1)) == NULL) PyErr_Clear();
    else {
        PyObject *was = run->next_step;
        run->next_step = nexto; /* the member takes this reference */
        nexto = NULL;
        Py_XDECREF(was);
    }
    if (given && wb->steps_given != Py_True) {
        PyObject *was = wb->steps_given;
        Py_INCREF(Py_True);
        wb->steps_given = Py_True;
        Py_XDECREF(was);
    }

out:
    if (vals != stack_vals) PyMem_Free(vals);
    Py_XDECREF(o);
    Py_XDECREF(flat);
    Py_XDECREF(w);
    Py_XDECREF(lock);
    Py_XDECREF(j);
    Py_XDECREF(nexto);
    if (PyErr_Occurred()) PyErr_Clear();
    return done;
}

static PyObject *s_log_slow;

/* Run.log(data, step=None, commit=None): the common row journaled here; every other row (and any row while the
 * run's state says so) goes to run.py's Run._log_slow, the reference. */
static PyObject *runb_log(PyObject *self, PyObject *args, PyObject *kw) {
    PyObject *data = NULL, *step = Py_None, *commit = Py_None;
    Py_ssize_t n = PyTuple_Size(args);
    if (kw == NULL && n >= 1 && n <= 2) {
        data = PyTuple_GetItem(args, 0);
        if (n == 2) step = PyTuple_GetItem(args, 1);
    } else {
        static char *kwlist[] = {"data", "step", "commit", NULL};
        if (!PyArg_ParseTupleAndKeywords(args, kw, "O|OO:log", kwlist, &data, &step, &commit)) return NULL;
    }
    if (commit == Py_None && fast_log((RunB *)self, data, step)) Py_RETURN_NONE;
    return PyObject_CallMethodObjArgs(self, s_log_slow, data, step, commit, NULL);
}

static PyMethodDef runb_methods[] = {
    {"log", (PyCFunction)(void (*)(void))runb_log, METH_VARARGS | METH_KEYWORDS,
     "log($self, /, data, step=None, commit=None)\n--\n\nAppends one row of metrics. Returns at once; never blocks on I/O."},
    {NULL, NULL, 0, NULL},
};

static PyType_Slot runb_slots[] = {
    {Py_tp_members, runb_members},
    {Py_tp_methods, runb_methods},
    {Py_tp_traverse, (void *)runb_traverse},
    {Py_tp_clear, (void *)runb_clear},
    {Py_tp_dealloc, (void *)runb_dealloc},
    {Py_tp_doc, (void *)"The fields of a run that log() reads, and log() itself in C (logd/run.py's Run derives from it)."},
    {0, NULL},
};

static PyType_Spec runb_spec = {"logd.hot._hot.RunBase", sizeof(RunB), 0, Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE | Py_TPFLAGS_HAVE_GC, runb_slots};

static PyType_Slot writerb_slots[] = {
    {Py_tp_members, writerb_members},
    {Py_tp_traverse, (void *)writerb_traverse},
    {Py_tp_clear, (void *)writerb_clear},
    {Py_tp_dealloc, (void *)writerb_dealloc},
    {Py_tp_doc, (void *)"The fields of a writer that log() reads (logd/spool/segments.py's OpenSegments derives from it)."},
    {0, NULL},
};

static PyType_Spec writerb_spec = {"logd.hot._hot.WriterBase", sizeof(WriterB), 0, Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE | Py_TPFLAGS_HAVE_GC, writerb_slots};

/* A console entry's time as '%.6f' formats it (console.py's _entry): seconds and microseconds, correctly rounded
 * (half to even), as CPython and glibc both do it. The common case in integer arithmetic; near a tie, snprintf. */
static int fmt_time(double t, char *buf, size_t size) {
    if (t >= 0 && t < 4e15) {
        long long sec = (long long)t;
        double x = (t - (double)sec) * 1e6; /* t - sec is exact; the product is within 1e-9 of the exact one */
        long long us = (long long)x;
        double rem = x - (double)us;
        if (rem < 0.5 - 1e-6 || rem > 0.5 + 1e-6) {
            if (rem > 0.5) us += 1;
            if (us >= 1000000) {
                sec += 1;
                us -= 1000000;
            }
            return snprintf(buf, size, "%lld.%06lld", sec, us);
        }
    }
    return snprintf(buf, size, "%.6f", t);
}

/* Writes one console entry for text (a str) at time t (a float) into the ring, which place() said it fits
 * (length from entry_length()). */
static Py_ssize_t entry_data(int tlen, Py_ssize_t esc) { return 5 + tlen + 6 + 3 + 7 + esc + 2; }

static void write_entry(Ring *r, Py_ssize_t length, Py_ssize_t data, const char *tbuf, int tlen, const char *stream, const Py_UCS4 *u,
                        Py_ssize_t n, Py_ssize_t noff, Py_ssize_t term) {
    unsigned char *rec = (unsigned char *)(uintptr_t)r->base + r->off;
    uint16_t type = 3, flags = 0;
    uint32_t kind = 3, blen = (uint32_t)data, zero = 0;
    memcpy(rec + 8, &type, 2);
    memcpy(rec + 10, &flags, 2);
    memcpy(rec + 12, &kind, 4);
    memcpy(rec + 16, &blen, 4);
    memcpy(rec + 20, &zero, 4);
    unsigned char *p = rec + 24;
    memcpy(p, "{\"t\":", 5);
    p += 5;
    memcpy(p, tbuf, (size_t)tlen);
    p += tlen;
    memcpy(p, ",\"s\":\"", 6);
    p += 6;
    memcpy(p, stream, 3);
    p += 3;
    memcpy(p, "\",\"l\":\"", 7);
    p += 7;
    p = escape(p, u, n);
    memcpy(p, "\"}", 2);
    p += 2;
    memset(p, 0, (size_t)(rec + length - p));
    commit_record(r, length, noff, term);
}

/* console(journal, t, stream, text) -> bool: one console entry, {"t":<t, '%.6f'>,"s":"<stream>","l":<text as JSON,
 * ASCII only>}, journaled as an UPDATE record of kind console: byte for byte what console.py's _entry() and
 * Journal.update("console", ...) write (the escapes are json's encode_basestring_ascii's). False, nothing done, when
 * it does not fit the common case (the Python path then takes it). */
static PyObject *hot_console(PyObject *mod, PyObject *args) {
    (void)mod;
    PyObject *j, *tobj, *s, *text;
    if (!PyArg_UnpackTuple(args, "console", 4, 4, &j, &tobj, &s, &text)) return NULL;
    if (!PyObject_TypeCheck(j, RingType) || !PyFloat_CheckExact(tobj) || !PyUnicode_CheckExact(s) || !PyUnicode_CheckExact(text))
        Py_RETURN_FALSE;
    const char *stream;
    if (PyUnicode_CompareWithASCIIString(s, "out") == 0) stream = "out";
    else if (PyUnicode_CompareWithASCIIString(s, "err") == 0) stream = "err";
    else Py_RETURN_FALSE;
    Ring *r = (Ring *)j;
    Py_UCS4 *u = NULL;
    int done = 0;
    Py_ssize_t n = PyUnicode_GetLength(text);
    char tbuf[48];
    int tlen = fmt_time(PyFloat_AsDouble(tobj), tbuf, sizeof tbuf);
    if (n < 0 || tlen <= 0 || tlen >= (int)sizeof tbuf) goto out;
    if ((u = PyUnicode_AsUCS4Copy(text)) == NULL) goto out;
    /* {"t":  repr  ,"s":"  out  ","l":"  text  "}  (5, 6, 3, 7 and 2 bytes around them) */
    Py_ssize_t data = entry_data(tlen, escaped_len(u, n));
    Py_ssize_t length = 24 + (data + 7) / 8 * 8, noff, term;
    if (!place(r, length, &noff, &term)) goto out;
    write_entry(r, length, data, tbuf, tlen, stream, u, n, noff, term);
    done = 1;
out:
    if (u != NULL) PyMem_Free(u);
    if (PyErr_Occurred()) PyErr_Clear();
    if (done) Py_RETURN_TRUE;
    Py_RETURN_FALSE;
}

/* This process's pid, kept current across fork() (glibc's getpid() is a system call). */
static pid_t my_pid;
static void pid_after_fork(void) { my_pid = getpid(); }

#define CONSOLE_CHARS_PER_FLUSH (1024 * 1024) /* console.py's */
#define JOURNAL_PIECE_CHARS 8192

/* tee(capture, stream, text) -> bool: the capture's side of one write to a captured sys.stdout or sys.stderr
 * (console.py _Tee.write, after the write itself went through), for a str in the common case: queued for the
 * writer thread, and, when it ends a line, the line journaled (hot_console's record). False, nothing done, for
 * anything else (bytes, the bound reached or a cut to mark, the writer's lock held, a journal near its end, a forked
 * child's write): the Python code takes it. */
static PyObject *s_stopped, *s_cpid, *s_queued_chars, *s_dropped, *s_journal_to, *s_queue, *s_append, *s_jline;

/* The console capture's fields that a captured write reads and writes, as C members (console's ConsoleCapture derives
 * from CaptureBase); Python code uses them as plain attributes. */
typedef struct {
    PyObject_HEAD
    PyObject *pid, *queue, *queued_chars, *dropped, *stopped, *journal_to, *jline, *qappend;
} CaptureB;

static PyMemberDef captureb_members[] = {
    {"_pid", T_OBJECT_EX, offsetof(CaptureB, pid), 0, NULL},
    {"_queue", T_OBJECT_EX, offsetof(CaptureB, queue), 0, NULL},
    {"_queued_chars", T_OBJECT_EX, offsetof(CaptureB, queued_chars), 0, NULL},
    {"_dropped", T_OBJECT_EX, offsetof(CaptureB, dropped), 0, NULL},
    {"_stopped", T_OBJECT_EX, offsetof(CaptureB, stopped), 0, NULL},
    {"journal_to", T_OBJECT_EX, offsetof(CaptureB, journal_to), 0, NULL},
    {"_jline", T_OBJECT_EX, offsetof(CaptureB, jline), 0, NULL},
    {"_queue_append", T_OBJECT_EX, offsetof(CaptureB, qappend), 0, NULL},
    {NULL, 0, 0, 0, NULL},
};

static int captureb_traverse(PyObject *self, visitproc visit, void *arg) {
    CaptureB *c = (CaptureB *)self;
    Py_VISIT(Py_TYPE(self));
    Py_VISIT(c->pid);
    Py_VISIT(c->queue);
    Py_VISIT(c->queued_chars);
    Py_VISIT(c->dropped);
    Py_VISIT(c->stopped);
    Py_VISIT(c->journal_to);
    Py_VISIT(c->jline);
    Py_VISIT(c->qappend);
    return 0;
}

static int captureb_clear(PyObject *self) {
    CaptureB *c = (CaptureB *)self;
    Py_CLEAR(c->pid);
    Py_CLEAR(c->queue);
    Py_CLEAR(c->queued_chars);
    Py_CLEAR(c->dropped);
    Py_CLEAR(c->stopped);
    Py_CLEAR(c->journal_to);
    Py_CLEAR(c->jline);
    Py_CLEAR(c->qappend);
    return 0;
}

static void captureb_dealloc(PyObject *self) {
    PyObject_GC_UnTrack(self);
    captureb_clear(self);
    free_instance(self);
}

static PyType_Slot captureb_slots[] = {
    {Py_tp_members, captureb_members},
    {Py_tp_traverse, (void *)captureb_traverse},
    {Py_tp_clear, (void *)captureb_clear},
    {Py_tp_dealloc, (void *)captureb_dealloc},
    {Py_tp_doc, (void *)"The fields of a console capture that a captured write reads (logd/console/'s ConsoleCapture derives from it)."},
    {0, NULL},
};

static PyType_Spec captureb_spec = {"logd.hot._hot.CaptureBase", sizeof(CaptureB), 0, Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE | Py_TPFLAGS_HAVE_GC, captureb_slots};

static PyTypeObject *CaptureBType;

static int tee_impl(PyObject *c, PyObject *s, PyObject *text) {
    if (!PyUnicode_CheckExact(text) || !PyUnicode_CheckExact(s)) return 0;
    const char *stream;
    if (PyUnicode_CompareWithASCIIString(s, "out") == 0) stream = "out";
    else if (PyUnicode_CompareWithASCIIString(s, "err") == 0) stream = "err";
    else return 0;
    Py_ssize_t k = PyUnicode_GetLength(text);
    if (k <= 0) return 0;
    PyObject *o = NULL, *w = NULL, *lock = NULL, *jo = NULL, *q = NULL, *jline = NULL, *line = NULL, *tobj = NULL, *tup = NULL,
             *joined = NULL, *empty = NULL, *res = NULL;
    Py_UCS4 *u = NULL;
    int done = 0;
    /* The capture: on, this process's, under its bound, no cut waiting to be marked on this stream. */
    if (!PyObject_TypeCheck(c, CaptureBType)) goto out;
    CaptureB *cb = (CaptureB *)c;
    if (cb->stopped != Py_False) goto out;
    if (cb->pid == NULL || !PyLong_CheckExact(cb->pid) || PyLong_AsLong(cb->pid) != (long)my_pid) goto out;
    if (cb->queued_chars == NULL || !PyLong_CheckExact(cb->queued_chars)) goto out;
    Py_ssize_t queued = PyLong_AsSsize_t(cb->queued_chars);
    if (PyErr_Occurred()) goto out;
    if (queued < 0 || queued + k > CONSOLE_CHARS_PER_FLUSH) goto out;
    if (cb->dropped == NULL || !PyDict_CheckExact(cb->dropped)) goto out;
    {
        PyObject *d = PyDict_GetItem(cb->dropped, s); /* borrowed */
        if (d == NULL || !PyLong_CheckExact(d) || PyLong_AsLong(d) != 0) goto out;
    }
    if (cb->queue == NULL) goto out;
    q = cb->queue;
    Py_INCREF(q);
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    double t = (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
    if ((tobj = PyFloat_FromDouble(t)) == NULL) goto out;
    /* Into the journal as well, a whole line at a time, when the writer's lock is free (console.py). */
    int journal = 0;
    Ring *r = NULL;
    if (cb->journal_to == NULL) goto out;
    w = cb->journal_to;
    Py_INCREF(w);
    if (w != Py_None && k <= JOURNAL_PIECE_CHARS) {
        if (!PyObject_TypeCheck(w, WriterBType)) goto out;
        WriterB *wb = (WriterB *)w;
        if (wb->journal == NULL) goto out;
        jo = wb->journal;
        Py_INCREF(jo);
        if (jo != Py_None) {
            if (!PyObject_TypeCheck(jo, RingType)) goto out;
            if (wb->buf_lock == NULL) goto out;
            lock = wb->buf_lock;
            Py_INCREF(lock);
            PyObject *held = lock_held(wb, lock);
            if (held == NULL) goto out;
            journal = held == Py_False; /* held (by the writer thread, or log() on this thread): only queued */
            Py_DECREF(held);
            r = (Ring *)jo;
        }
    }
    Py_ssize_t length = 0, data = 0, noff = 0, term = -1, n = 0;
    char tbuf[48];
    int tlen = 0;
    PyObject *lt = NULL; /* the line's time (borrowed from line or tobj) */
    int ends = 0;
    if (journal) {
        if (cb->jline == NULL || !PyDict_CheckExact(cb->jline)) goto out;
        jline = cb->jline;
        Py_INCREF(jline);
        line = PyDict_GetItem(jline, s); /* borrowed */
        if (line == NULL || !PyList_CheckExact(line) || PyList_Size(line) != 2) goto out;
        Py_INCREF(line);
        PyObject *sofar = PyList_GetItem(line, 0), *at = PyList_GetItem(line, 1);
        if (sofar == NULL || at == NULL || !PyUnicode_CheckExact(sofar) || !PyFloat_CheckExact(at)) goto out;
        lt = PyUnicode_GetLength(sofar) ? at : tobj;
        if ((joined = PyUnicode_Concat(sofar, text)) == NULL) goto out;
        n = PyUnicode_GetLength(joined);
        ends = PyUnicode_ReadChar(text, k - 1) == '\n' || n > JOURNAL_PIECE_CHARS;
        if (ends) {
            if ((u = PyUnicode_AsUCS4Copy(joined)) == NULL) goto out;
            tlen = fmt_time(PyFloat_AsDouble(lt), tbuf, sizeof tbuf);
            if (tlen <= 0 || tlen >= (int)sizeof tbuf) goto out;
            data = entry_data(tlen, escaped_len(u, n));
            length = 24 + (data + 7) / 8 * 8;
            if (!place(r, length, &noff, &term)) goto out;
        }
    }
    /* Everything checked: the changes. */
    if ((tup = PyTuple_Pack(3, s, text, tobj)) == NULL || (res = cb->qappend != NULL ? PyObject_CallFunctionObjArgs(cb->qappend, tup, NULL) : PyObject_CallMethodObjArgs(q, s_append, tup, NULL)) == NULL)
        goto out;
    done = 1; /* queued: from here on nothing is handed back (a failure below loses only the journal copy) */
    if (journal) {
        if (ends) {
            write_entry(r, length, data, tbuf, tlen, stream, u, n, noff, term);
            if ((empty = PyUnicode_FromString("")) != NULL) PyList_SetItem(line, 0, empty), empty = NULL;
        } else {
            if (lt == tobj) Py_INCREF(tobj), PyList_SetItem(line, 1, tobj);
            PyList_SetItem(line, 0, joined);
            joined = NULL; /* the list took it */
        }
    }
    if ((o = PyLong_FromSsize_t(queued + k)) != NULL) {
        PyObject *was = cb->queued_chars;
        cb->queued_chars = o; /* the member takes this reference */
        o = NULL;
        Py_XDECREF(was);
    }
out:
    if (u != NULL) PyMem_Free(u);
    Py_XDECREF(o);
    Py_XDECREF(w);
    Py_XDECREF(lock);
    Py_XDECREF(jo);
    Py_XDECREF(q);
    Py_XDECREF(jline);
    Py_XDECREF(line);
    Py_XDECREF(tobj);
    Py_XDECREF(tup);
    Py_XDECREF(joined);
    Py_XDECREF(res);
    if (PyErr_Occurred()) PyErr_Clear();
    return done;
}

static PyObject *hot_tee(PyObject *mod, PyObject *args) {
    (void)mod;
    PyObject *c, *s, *text;
    if (!PyArg_UnpackTuple(args, "tee", 3, 3, &c, &s, &text)) return NULL;
    if (tee_impl(c, s, text)) Py_RETURN_TRUE;
    Py_RETURN_FALSE;
}

/* TeeBase: console.py's _Tee derives from it, so a captured sys.stdout.write() is this C method: the write goes
 * through to the wrapped stream (its result, or its exception, is the caller's), then the capture's side is
 * tee_impl(), or, for anything it hands back, the Python method _logd_slow(text). */
typedef struct {
    PyObject_HEAD
    PyObject *capture; /* _logd_capture */
    PyObject *stream;  /* _logd_stream */
    PyObject *name;    /* _logd_name: "out" or "err" */
} Tee;

static PyMemberDef tee_members[] = {
    {"_logd_capture", T_OBJECT, offsetof(Tee, capture), 0, NULL},
    {"_logd_stream", T_OBJECT, offsetof(Tee, stream), 0, NULL},
    {"_logd_name", T_OBJECT, offsetof(Tee, name), 0, NULL},
    {NULL, 0, 0, 0, NULL},
};

static PyObject *s_write, *s_slow;

static PyObject *tee_write(PyObject *self, PyObject *text) {
    Tee *t = (Tee *)self;
    if (t->stream == NULL) {
        PyErr_SetString(PyExc_AttributeError, "_logd_stream");
        return NULL;
    }
    PyObject *n = PyObject_CallMethodObjArgs(t->stream, s_write, text, NULL);
    if (n == NULL) return NULL;
    if (t->capture != NULL && t->name != NULL && tee_impl(t->capture, t->name, text)) return n;
    PyObject *r = PyObject_CallMethodObjArgs(self, s_slow, text, NULL);
    if (r == NULL) PyErr_Clear(); /* the copy never gets in the way of the write itself */
    Py_XDECREF(r);
    return n;
}

static PyMethodDef tee_methods[] = {
    {"write", tee_write, METH_O, "Writes through to the wrapped stream, then keeps a copy (logd/console/)."},
    {NULL, NULL, 0, NULL},
};

static void tee_dealloc(PyObject *self) {
    Tee *t = (Tee *)self;
    Py_CLEAR(t->capture);
    Py_CLEAR(t->stream);
    Py_CLEAR(t->name);
    free_instance(self);
}

static PyType_Slot tee_slots[] = {
    {Py_tp_members, tee_members},
    {Py_tp_methods, tee_methods},
    {Py_tp_dealloc, (void *)tee_dealloc},
    {Py_tp_doc, (void *)"A captured console stream's write() in C (logd/console/'s _Tee derives from it)."},
    {0, NULL},
};

static PyType_Spec tee_spec = {"logd.hot._hot.TeeBase", sizeof(Tee), 0, Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE, tee_slots};

static PyObject *hot_crc32(PyObject *mod, PyObject *arg) {
    (void)mod;
    if (!PyBytes_Check(arg)) {
        PyErr_SetString(PyExc_TypeError, "crc32(bytes)");
        return NULL;
    }
    return PyLong_FromUnsignedLong(crc32_of((const unsigned char *)PyBytes_AsString(arg), (size_t)PyBytes_Size(arg)));
}

static PyMethodDef hot_methods[] = {
    {"console", hot_console, METH_VARARGS,
     "console(journal, t, stream, text) -> bool: the console entry journaled here, or False (nothing done)."},
    {"tee", hot_tee, METH_VARARGS,
     "tee(capture, stream, text) -> bool: the capture's side of a console write done here, or False (nothing done)."},
    {"crc32", hot_crc32, METH_O, "crc32(bytes) -> int, as zlib.crc32 (the journal's checksum)."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef hot_module = {PyModuleDef_HEAD_INIT, "logd.hot._hot", "logd's hot path in C (see _hot.c).", -1, hot_methods,
                                        NULL, NULL, NULL, NULL};

#define INTERN(var, text)                                          \
    if ((var = PyUnicode_InternFromString(text)) == NULL) return NULL

PyMODINIT_FUNC PyInit__hot(void) {
    crc_init();
    my_pid = getpid();
    pthread_atfork(NULL, NULL, pid_after_fork);
    INTERN(s_finished, "_finished");
    INTERN(s_flat_keys, "_flat_keys");
    INTERN(s_ddp_watch, "_ddp_watch");
    INTERN(s_pending, "_pending");
    INTERN(s_row_media, "_row_media");
    INTERN(s_row_device, "_row_device");
    INTERN(s_device_queue, "_device_queue");
    INTERN(s_next_step, "_next_step");
    INTERN(s_writer, "_writer");
    INTERN(s_pid, "_pid");
    INTERN(s_wpid, "pid");
    INTERN(s_buf_lock, "_buf_lock");
    INTERN(s_locked, "locked");
    INTERN(s_journal, "journal");
    INTERN(s_ring_to, "_ring_to");
    INTERN(s_steps_given, "steps_given");
    INTERN(s_stopped, "_stopped");
    INTERN(s_cpid, "_pid");
    INTERN(s_queued_chars, "_queued_chars");
    INTERN(s_dropped, "_dropped");
    INTERN(s_journal_to, "journal_to");
    INTERN(s_queue, "_queue");
    INTERN(s_append, "append");
    INTERN(s_jline, "_jline");
    INTERN(s_write, "write");
    INTERN(s_slow, "_logd_slow");
    INTERN(s_log_slow, "_log_slow");
    PyObject *m = PyModule_Create(&hot_module);
    if (m == NULL) return NULL;
    RingType = (PyTypeObject *)PyType_FromSpec(&ring_spec);
    if (RingType == NULL) return NULL;
    Py_INCREF(RingType);
    if (PyModule_AddObject(m, "Ring", (PyObject *)RingType) < 0) return NULL;
    RunBType = (PyTypeObject *)PyType_FromSpec(&runb_spec);
    if (RunBType == NULL) return NULL;
    Py_INCREF(RunBType);
    if (PyModule_AddObject(m, "RunBase", (PyObject *)RunBType) < 0) return NULL;
    WriterBType = (PyTypeObject *)PyType_FromSpec(&writerb_spec);
    if (WriterBType == NULL) return NULL;
    Py_INCREF(WriterBType);
    if (PyModule_AddObject(m, "WriterBase", (PyObject *)WriterBType) < 0) return NULL;
    CaptureBType = (PyTypeObject *)PyType_FromSpec(&captureb_spec);
    if (CaptureBType == NULL) return NULL;
    Py_INCREF(CaptureBType);
    if (PyModule_AddObject(m, "CaptureBase", (PyObject *)CaptureBType) < 0) return NULL;
    PyObject *tee = PyType_FromSpec(&tee_spec);
    if (tee == NULL || PyModule_AddObject(m, "TeeBase", tee) < 0) return NULL;
    return m;
}
