/* Optional C accelerator of sjf_core.predict._lexicon.buckets_of + Lexicon.score_buckets.
 *
 * score(window_lower: bytes, weights: float32 buffer [n], n_buckets: int) -> (sum: float, count: int)
 *
 * Words are maximal runs of [a-z0-9_] or bytes >= 0x80 of the already lower-cased window
 * (the regex of sjf_core.predict._lexicon._WORD). Each word is hashed with CRC-32 (zlib's polynomial);
 * unigram bucket = h & (n - 1); bigram bucket = ((((h_i * MIX1 + h_{i+1} + 0x5BD1E995) & M32)
 * * MIX2) & M32) >> 8 & (n - 1), exactly the numpy uint64 arithmetic of the Python code.
 * Returns the float64 sum of the weights of the distinct buckets and their number; the
 * Python code computes intercept + sum / sqrt(count). The Python implementation is the
 * reference; tests/unit/test_predictor.py checks that both give the same score.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <stdlib.h>

static uint32_t crc_table[256];

static void init_crc(void) {
    for (uint32_t i = 0; i < 256; i++) {
        uint32_t c = i;
        for (int k = 0; k < 8; k++) c = (c & 1u) ? 0xEDB88320u ^ (c >> 1) : c >> 1;
        crc_table[i] = c;
    }
}

static inline int is_word(unsigned char c) {
    return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' || c >= 0x80;
}

static int cmp_u32(const void *a, const void *b) {
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return (x > y) - (x < y);
}

static PyObject *lex_score(PyObject *self, PyObject *args) {
    Py_buffer text, wbuf;
    Py_ssize_t n_buckets;
    if (!PyArg_ParseTuple(args, "y*y*n", &text, &wbuf, &n_buckets)) return NULL;
    if (n_buckets <= 0 || (n_buckets & (n_buckets - 1)) || wbuf.len != n_buckets * (Py_ssize_t)sizeof(float)) {
        PyBuffer_Release(&text);
        PyBuffer_Release(&wbuf);
        PyErr_SetString(PyExc_ValueError, "weights must be float32 [n_buckets], n_buckets a power of two");
        return NULL;
    }
    const unsigned char *p = (const unsigned char *)text.buf;
    Py_ssize_t n = text.len;
    const float *w = (const float *)wbuf.buf;
    /* at most one word per two bytes (a word and a separator): n / 2 + 1 words */
    Py_ssize_t cap = n / 2 + 2;
    uint32_t *b = (uint32_t *)malloc(sizeof(uint32_t) * (size_t)(2 * cap));
    if (b == NULL) {
        PyBuffer_Release(&text);
        PyBuffer_Release(&wbuf);
        return PyErr_NoMemory();
    }
    const uint64_t mask = (uint64_t)(n_buckets - 1), M32 = 0xFFFFFFFFull;
    const uint64_t MIX1 = 0x9E3779B1ull, MIX2 = 0x85EBCA6Bull, SALT = 0x5BD1E995ull;
    Py_ssize_t nb = 0, i = 0;
    int have_prev = 0;
    uint64_t prev = 0;
    Py_BEGIN_ALLOW_THREADS
    while (i < n) {
        while (i < n && !is_word(p[i])) i++;
        if (i >= n) break;
        uint32_t c = 0xFFFFFFFFu;
        while (i < n && is_word(p[i])) {
            c = crc_table[(c ^ p[i]) & 0xFFu] ^ (c >> 8);
            i++;
        }
        uint64_t h = (uint64_t)(c ^ 0xFFFFFFFFu);
        b[nb++] = (uint32_t)(h & mask);
        if (have_prev) {
            uint64_t x = (prev * MIX1 + h + SALT) & M32;
            x = ((x * MIX2) & M32) >> 8;
            b[nb++] = (uint32_t)(x & mask);
        }
        prev = h;
        have_prev = 1;
    }
    Py_END_ALLOW_THREADS
    double sum = 0.0;
    Py_ssize_t count = 0;
    if (nb > 0) {
        /* distinct buckets in increasing order (as np.unique gives them): a bitmap when the
         * table is small, else a sort */
        uint64_t *bits = n_buckets <= (1 << 22) ? (uint64_t *)calloc((size_t)(n_buckets / 64 + 1), 8) : NULL;
        if (bits != NULL) {
            for (Py_ssize_t k = 0; k < nb; k++) bits[b[k] >> 6] |= 1ull << (b[k] & 63u);
            Py_ssize_t nw = n_buckets / 64 + 1;
            for (Py_ssize_t j = 0; j < nw; j++) {
                uint64_t v = bits[j];
                while (v) {
                    int t = __builtin_ctzll(v);
                    sum += (double)w[(j << 6) + t];
                    count++;
                    v &= v - 1;
                }
            }
            free(bits);
        } else {
            qsort(b, (size_t)nb, sizeof(uint32_t), cmp_u32);
            for (Py_ssize_t k = 0; k < nb; k++) {
                if (k == 0 || b[k] != b[k - 1]) {
                    sum += (double)w[b[k]];
                    count++;
                }
            }
        }
    }
    free(b);
    PyBuffer_Release(&text);
    PyBuffer_Release(&wbuf);
    return Py_BuildValue("dn", sum, count);
}

static PyMethodDef methods[] = {
    {"score", lex_score, METH_VARARGS, "score(window_lower, weights_f32, n_buckets) -> (sum, count)"},
    {NULL, NULL, 0, NULL}};

static struct PyModuleDef moddef = {PyModuleDef_HEAD_INIT, "_lex",
                                    "Optional C accelerator of sjf_core.predict._lexicon.", -1, methods};

PyMODINIT_FUNC PyInit__lex(void) {
    init_crc();
    return PyModule_Create(&moddef);
}
