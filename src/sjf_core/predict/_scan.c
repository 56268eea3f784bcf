/*
 * sjf_core.predict._scan: optional C accelerator of the v1/v2 feature extractors.
 *
 * It computes exactly what sjf_core/predict/_features.py and _features_v2.py compute in Python
 * (the Python code is the reference; tests/unit/test_features_fast.py checks equality on real
 * prompts and random text). It holds no word lists of its own: Python passes them in with
 * configure(), so the two implementations cannot drift apart silently.
 *
 * fill(window_utf8: bytes, n_chars: int, n_chars_window: int, out: float32 buffer, layout: int)
 *   window_utf8: the scanned window (features.window(text)) encoded as UTF-8 (surrogatepass)
 *   n_chars: characters of the whole text; n_chars_window: characters of the window
 *   out: zeroed, writable, C-contiguous float32 buffer of 19 (layout 1) or the v2 width (layout 2)
 */
#define _GNU_SOURCE 1 /* memmem */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

enum {
    C_CODE = 1u << 0, C_CPLAIN = 1u << 1, C_CNUM = 1u << 2, C_VERB = 1u << 3, C_LINER = 1u << 4,
    C_LONG = 1u << 8, C_SHORT = 1u << 9,
    C_TRANS = 1u << 10, C_CONT = 1u << 11, C_CODET = 1u << 12, C_CREAT = 1u << 13, C_WH = 1u << 14,
    C_YESNO = 1u << 15
};
#define N_TASK 6
#define NG0 41 /* first n-gram column of the v2 layout */
static const uint32_t TASK_BITS[N_TASK] = {C_LONG, C_SHORT, C_TRANS, C_CONT, C_CODET, C_CREAT};

typedef struct {
    char *s;
    Py_ssize_t len;
    uint32_t cats;
    int rank;          /* verb priority rank, or -1 */
} Entry;

static Entry *lex = NULL;
static Py_ssize_t n_lex = 0;
static int32_t *htab = NULL;   /* open addressing: index into lex, -1 empty */
static size_t hmask = 0;
static int verb_col[64];
static int n_verb_ranks = 0;
static int other_col = 18;
static char **fmt_sub = NULL; static Py_ssize_t *fmt_len = NULL; static Py_ssize_t n_fmt = 0;
static char **useps = NULL; static Py_ssize_t *usep_len = NULL; static Py_ssize_t n_useps = 0;
static long ngram_buckets = 1024, ngram_head = 64, ngram_tail = 32;
static int configured = 0;
static uint32_t crc_table[256];

static uint64_t fnv(const unsigned char *s, Py_ssize_t n) {
    uint64_t h = 1469598103934665603ULL;
    for (Py_ssize_t i = 0; i < n; i++) { h ^= s[i]; h *= 1099511628211ULL; }
    return h;
}

static int lookup(const unsigned char *s, Py_ssize_t n) {
    if (!htab) return -1;
    size_t i = (size_t)fnv(s, n) & hmask;
    for (;;) {
        int32_t k = htab[i];
        if (k < 0) return -1;
        if (lex[k].len == n && memcmp(lex[k].s, s, (size_t)n) == 0) return k;
        i = (i + 1) & hmask;
    }
}

static void crc_init(void) {
    for (uint32_t i = 0; i < 256; i++) {
        uint32_t c = i;
        for (int k = 0; k < 8; k++) c = (c & 1) ? 0xEDB88320u ^ (c >> 1) : c >> 1;
        crc_table[i] = c;
    }
}

static uint32_t crc32_bytes(const unsigned char *s, Py_ssize_t n) {
    uint32_t c = 0xFFFFFFFFu;
    for (Py_ssize_t i = 0; i < n; i++) c = crc_table[(c ^ s[i]) & 0xFF] ^ (c >> 8);
    return c ^ 0xFFFFFFFFu;
}

/* ---- helpers with Python bytes semantics ------------------------------------------------ */
static int is_ws(unsigned char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == 0x0b || c == 0x0c; }
static int is_w(unsigned char c) {  /* \w of a bytes regex: ASCII letters, digits, _ */
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
}
static int is_d(unsigned char c) { return c >= '0' && c <= '9'; }

static const unsigned char *mem_find(const unsigned char *s, Py_ssize_t n, const char *pat, Py_ssize_t m) {
    if (m == 0 || n < m) return NULL;
#if defined(__GLIBC__) || defined(__APPLE__) || defined(__FreeBSD__)
    return (const unsigned char *)memmem(s, (size_t)n, pat, (size_t)m);
#else
    for (Py_ssize_t i = 0; i <= n - m; i++) {
        const unsigned char *p = memchr(s + i, (unsigned char)pat[0], (size_t)(n - m - i + 1));
        if (!p) return NULL;
        i = p - s;
        if (memcmp(s + i, pat, (size_t)m) == 0) return s + i;
    }
    return NULL;
#endif
}

/* occurrences of pat in s, non-overlapping, left to right (bytes.count semantics) */
static Py_ssize_t count_nonoverlap(const unsigned char *s, Py_ssize_t n, const char *pat, Py_ssize_t m) {
    Py_ssize_t c = 0, i = 0;
    const unsigned char *p;
    while ((p = mem_find(s + i, n - i, pat, m)) != NULL) { c++; i = (p - s) + m; }
    return c;
}

static Py_ssize_t find_sub(const unsigned char *s, Py_ssize_t n, const char *pat, Py_ssize_t m) {
    const unsigned char *p = mem_find(s, n, pat, m);
    return p ? p - s : -1;
}

static Py_ssize_t rfind_sub(const unsigned char *s, Py_ssize_t n, const char *pat, Py_ssize_t m) {
    if (m > n || m == 0) return -1;
    Py_ssize_t end = n - m + 1;  /* candidate starts are < end */
    while (end > 0) {
#if defined(__GLIBC__)
        const unsigned char *p = memrchr(s, (unsigned char)pat[0], (size_t)end);
        if (!p) return -1;
        Py_ssize_t i = p - s;
#else
        Py_ssize_t i = end - 1;
        while (i >= 0 && s[i] != (unsigned char)pat[0]) i--;
        if (i < 0) return -1;
#endif
        if (memcmp(s + i, pat, (size_t)m) == 0) return i;
        end = i;
    }
    return -1;
}

/* literal at p (no bounds beyond n) */
static int lit(const unsigned char *s, Py_ssize_t n, Py_ssize_t p, const char *w) {
    Py_ssize_t m = (Py_ssize_t)strlen(w);
    return p + m <= n && memcmp(s + p, w, (size_t)m) == 0;
}
static Py_ssize_t skip_ws1(const unsigned char *s, Py_ssize_t n, Py_ssize_t p) {  /* \s+ : -1 if none */
    if (p >= n || !is_ws(s[p])) return -1;
    while (p < n && is_ws(s[p])) p++;
    return p;
}
static Py_ssize_t skip_d1(const unsigned char *s, Py_ssize_t n, Py_ssize_t p) {  /* \d+ */
    if (p >= n || !is_d(s[p])) return -1;
    while (p < n && is_d(s[p])) p++;
    return p;
}
static int boundary_after(const unsigned char *s, Py_ssize_t n, Py_ssize_t p) {  /* \b at p after a \w */
    return p >= n || !is_w(s[p]);
}
/* "word" or "words" (or "sentence"/"sentences") at p followed by \b */
static int word_s_b(const unsigned char *s, Py_ssize_t n, Py_ssize_t p, const char *stem) {
    if (!lit(s, n, p, stem)) return 0;
    Py_ssize_t q = p + (Py_ssize_t)strlen(stem);
    if (q < n && s[q] == 's' && boundary_after(s, n, q + 1)) return 1;
    return boundary_after(s, n, q);
}

/* \bin\s+\d+\s+(?:words?|sentences?)\b|\bno\s+more\s+than\s+\d+|\bunder\s+\d+\s+words?\b */
static int constraint_num_re(const unsigned char *s, Py_ssize_t n) {
    for (Py_ssize_t p = 0; p < n; p++) {
        if (p > 0 && is_w(s[p - 1])) continue;
        unsigned char c = s[p];
        if (c == 'i' && lit(s, n, p, "in")) {
            Py_ssize_t q = skip_ws1(s, n, p + 2);
            if (q >= 0 && (q = skip_d1(s, n, q)) >= 0 && (q = skip_ws1(s, n, q)) >= 0 &&
                (word_s_b(s, n, q, "word") || word_s_b(s, n, q, "sentence"))) return 1;
        } else if (c == 'n' && lit(s, n, p, "no")) {
            Py_ssize_t q = skip_ws1(s, n, p + 2);
            if (q >= 0 && lit(s, n, q, "more") && (q = skip_ws1(s, n, q + 4)) >= 0 && lit(s, n, q, "than") &&
                (q = skip_ws1(s, n, q + 4)) >= 0 && q < n && is_d(s[q])) return 1;
        } else if (c == 'u' && lit(s, n, p, "under")) {
            Py_ssize_t q = skip_ws1(s, n, p + 5);
            if (q >= 0 && (q = skip_d1(s, n, q)) >= 0 && (q = skip_ws1(s, n, q)) >= 0 && word_s_b(s, n, q, "word"))
                return 1;
        }
    }
    return 0;
}

/* \bone[\s-]liner\b */
static int one_liner_re(const unsigned char *s, Py_ssize_t n) {
    for (Py_ssize_t p = 0; p + 9 <= n; p++) {
        if (s[p] != 'o' || (p > 0 && is_w(s[p - 1]))) continue;
        if (lit(s, n, p, "one") && (is_ws(s[p + 3]) || s[p + 3] == '-') && lit(s, n, p + 4, "liner") &&
            boundary_after(s, n, p + 9)) return 1;
    }
    return 0;
}

static double log1p_pos(double x) { return x > 0 ? log1p(x) : 0.0; }

typedef struct { const unsigned char *s; Py_ssize_t n; int ent; } Tok;

static PyObject *scan_fill(PyObject *self, PyObject *args) {
    Py_buffer win, outb;
    Py_ssize_t n_chars, n_chars_w;
    int layout;
    if (!configured) { PyErr_SetString(PyExc_RuntimeError, "_scan.configure() was not called"); return NULL; }
    if (!PyArg_ParseTuple(args, "y*nnw*i", &win, &n_chars, &n_chars_w, &outb, &layout)) return NULL;
    PyObject *ret = NULL;
    unsigned char *low = NULL, *tb = NULL;
    Tok *toks = NULL;
    unsigned char *seen = NULL;
    Py_ssize_t need = layout == 2 ? NG0 + ngram_buckets : 19;
    if (outb.itemsize != 4 || outb.len < need * 4 || !PyBuffer_IsContiguous(&outb, 'C')) {
        PyErr_SetString(PyExc_ValueError, "out must be a C-contiguous float32 buffer of the layout's width");
        goto done;
    }
    float *out = (float *)outb.buf;
    const unsigned char *src = (const unsigned char *)win.buf;
    Py_ssize_t n = win.len;
    low = (unsigned char *)malloc((size_t)n + 1);
    tb = (unsigned char *)malloc((size_t)n + 1);
    toks = (Tok *)malloc(sizeof(Tok) * (size_t)(n / 2 + 2));
    seen = (unsigned char *)calloc((size_t)n_lex + 1, 1);
    if (!low || !tb || !toks || !seen) { PyErr_NoMemory(); goto done; }
    int ascii = 1, digit = 0;
    Py_ssize_t n_comma = 0, n_semi = 0, n_nl = 0, n_q = 0, n_q_nl = 0, n_colon_nl = 0, n_nl_gt = 0;
    Py_ssize_t n_cjk = 0, n_cyr = 0, n_dq = 0, n_bt = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        unsigned char c = src[i];
        if (c >= 'a' && c <= 'z') { low[i] = c; tb[i] = c; continue; }
        if (c >= 'A' && c <= 'Z') { c = (unsigned char)(c + 32); low[i] = c; tb[i] = c; continue; }
        low[i] = c;
        if (c >= 0x80) {
            ascii = 0;
            tb[i] = c;
            if (c >= 0xE3 && c <= 0xED) n_cjk++;
            else if (c >= 0xD0 && c <= 0xD3) n_cyr++;
            continue;
        }
        if (c >= '0' && c <= '9') { digit = 1; tb[i] = c; continue; }
        tb[i] = c == '_' ? c : ' ';
        switch (c) {
            case ',': n_comma++; break;
            case ';': n_semi++; break;
            case '\n':
                n_nl++;
                if (i + 1 < n && src[i + 1] == '>') n_nl_gt++;
                break;
            case '?':
                n_q++;
                if (i + 1 < n && src[i + 1] == '\n') n_q_nl++;
                break;
            case ':':
                if (i + 1 < n && src[i + 1] == '\n') n_colon_nl++;
                break;
            case '"': n_dq++; break;
            case '`': n_bt++; break;
            default: break;
        }
    }
    if (!ascii) {  /* non-ASCII punctuation separates words too */
        for (Py_ssize_t k = 0; k < n_useps; k++) {
            const char *sp = useps[k];
            Py_ssize_t m = usep_len[k];
            for (Py_ssize_t i = 0; i + m <= n; i++)
                if (low[i] == (unsigned char)sp[0] && memcmp(low + i, sp, (size_t)m) == 0) {
                    memset(tb + i, ' ', (size_t)m);
                    i += m - 1;
                }
        }
    }
    /* tokens and their lexicon entries */
    Py_ssize_t nt = 0;
    for (Py_ssize_t i = 0; i < n;) {
        while (i < n && tb[i] == ' ') i++;
        if (i >= n) break;
        Py_ssize_t j = i;
        while (j < n && tb[j] != ' ') j++;
        toks[nt].s = tb + i; toks[nt].n = j - i; toks[nt].ent = lookup(tb + i, j - i);
        nt++;
        i = j;
    }
    uint32_t present = 0;
    int best_rank = 1 << 20;
    long task_count[N_TASK] = {0};
    for (Py_ssize_t t = 0; t < nt; t++) {
        int e = toks[t].ent;
        if (e < 0) continue;
        uint32_t c = lex[e].cats;
        present |= c;
        if ((c & C_VERB) && lex[e].rank < best_rank) best_rank = lex[e].rank;
        if (!seen[e]) {
            seen[e] = 1;
            for (int k = 0; k < N_TASK; k++) if (c & TASK_BITS[k]) task_count[k]++;
        }
    }
    /* ---- v1 ---- */
    out[0] = (float)(n_chars / 4);
    out[1] = (present & C_CODE) ? 1.0f : 0.0f;
    int constraint = 0;
    if ((present & C_CPLAIN) || (n_semi > 0 && find_sub(low, n, "tl;dr", 5) >= 0)) constraint = 1;
    else if ((present & C_LINER) && one_liner_re(low, n)) constraint = 1;
    else if (present & C_CNUM) {
        if (digit) constraint = constraint_num_re(low, n);
    }
    out[2] = constraint ? 1.0f : 0.0f;
    Py_ssize_t e_ = n;
    while (e_ > 0 && is_ws(low[e_ - 1])) e_--;
    int ends_q = e_ > 0 && low[e_ - 1] == '?';
    out[3] = ends_q ? 1.0f : 0.0f;
    for (Py_ssize_t k = 0; k < n_fmt; k++)
        if (find_sub(low, n, fmt_sub[k], fmt_len[k]) >= 0) { out[4] = 1.0f; break; }
    out[5] = (float)(n_comma + n_semi +
                     count_nonoverlap(low, n, " and ", 5) + count_nonoverlap(low, n, " but ", 5) +
                     count_nonoverlap(low, n, " because ", 9));
    int col = other_col;
    if (best_rank < n_verb_ranks) col = verb_col[best_rank];
    out[col] = 1.0f;
    if (layout != 2) { ret = Py_None; Py_INCREF(ret); goto done; }
    /* ---- v2 ---- */
    double nb = n > 0 ? (double)n : 1.0;
    out[19] = (float)log1p_pos((double)n_chars);
    out[20] = (float)nt;
    out[21] = (float)(n_nl + 1);
    Py_ssize_t b0 = 0, b1 = n;
    while (b0 < b1 && is_ws(low[b0])) b0++;
    while (b1 > b0 && is_ws(low[b1 - 1])) b1--;
    Py_ssize_t blen = b1 - b0;
    Py_ssize_t first = -1, last = -1, paras = 0;
    if (n_nl >= 2) {
        first = find_sub(low + b0, blen, "\n\n", 2);
        if (first >= 0) {
            last = rfind_sub(low + b0, blen, "\n\n", 2);
            paras = count_nonoverlap(low + b0, blen, "\n\n", 2);
        }
    }
    out[22] = (float)log1p_pos((double)(first >= 0 ? first : blen));
    out[23] = (float)log1p_pos((double)(last >= 0 ? blen - last - 2 : blen));
    out[24] = (float)paras;
    Py_ssize_t fences = n_bt >= 3 ? count_nonoverlap(low, n, "```", 3) : 0;
    out[26] = (float)fences;
    if (fences >= 2) {
        Py_ssize_t inside = 0, i = 0, part = 0;
        for (;;) {
            Py_ssize_t f = find_sub(low + i, n - i, "```", 3);
            Py_ssize_t end = f >= 0 ? i + f : n;
            if (part % 2 == 1) inside += end - i;
            if (f < 0) break;
            i = end + 3;
            part++;
        }
        out[25] = (float)((double)inside / nb);
    }
    out[27] = (float)((n_dq >= 3 ? count_nonoverlap(low, n, "\"\"\"", 3) : 0) + n_nl_gt + n_colon_nl);
    out[28] = (float)n_q;
    out[29] = (float)(n_q_nl + (ends_q ? 1 : 0));
    if (nt > 0 && toks[0].ent >= 0) {
        out[30] = (lex[toks[0].ent].cats & C_WH) ? 1.0f : 0.0f;
        out[31] = (lex[toks[0].ent].cats & C_YESNO) ? 1.0f : 0.0f;
    }
    double ncw = n_chars_w > 0 ? (double)n_chars_w : 1.0;
    out[32] = (float)((double)(n - n_chars_w) / ncw);
    if (out[32] > 0) {
        out[33] = (float)((double)n_cjk / ncw);
        out[34] = (float)((double)n_cyr / ncw);
    }
    for (int k = 0; k < N_TASK; k++) out[35 + k] = (float)task_count[k];
    if (find_sub(low, n, "yes or no", 9) >= 0 || find_sub(low, n, "one word", 8) >= 0) out[36] += 2.0f;
    /* hashed unigrams + bigrams of the head and tail words */
    if (nt > 0) {
        const Py_ssize_t H = ngram_head, T = ngram_tail;
        Py_ssize_t m = nt > H + T ? H + T : nt;
        uint64_t prev = 0;
        for (Py_ssize_t k = 0; k < m; k++) {
            const Tok *t = nt > H + T ? (k < H ? &toks[k] : &toks[nt - T + (k - H)]) : &toks[k];
            uint64_t h = (uint64_t)crc32_bytes(t->s, t->n);
            out[NG0 + (Py_ssize_t)(h % (uint64_t)ngram_buckets)] = 1.0f;
            if (k > 0) {
                uint64_t x = (prev * 0x9E3779B1ULL + h) & 0xFFFFFFFFULL;
                x = ((x * 0x85EBCA6BULL) & 0xFFFFFFFFULL) >> 12;
                out[NG0 + (Py_ssize_t)(x % (uint64_t)ngram_buckets)] = 1.0f;
            }
            prev = h;
        }
    }
    ret = Py_None; Py_INCREF(ret);
done:
    free(low); free(tb); free(toks); free(seen);
    PyBuffer_Release(&win);
    PyBuffer_Release(&outb);
    return ret;
}

static void free_config(void) {
    for (Py_ssize_t i = 0; i < n_lex; i++) free(lex[i].s);
    free(lex); lex = NULL; n_lex = 0;
    free(htab); htab = NULL;
    for (Py_ssize_t i = 0; i < n_fmt; i++) free(fmt_sub[i]);
    free(fmt_sub); free(fmt_len); fmt_sub = NULL; fmt_len = NULL; n_fmt = 0;
    for (Py_ssize_t i = 0; i < n_useps; i++) free(useps[i]);
    free(useps); free(usep_len); useps = NULL; usep_len = NULL; n_useps = 0;
    configured = 0;
}

static int copy_bytes_list(PyObject *seq, char ***arr, Py_ssize_t **lens, Py_ssize_t *count) {
    Py_ssize_t k = PySequence_Size(seq);
    if (k < 0) return -1;
    *arr = (char **)calloc((size_t)k + 1, sizeof(char *));
    *lens = (Py_ssize_t *)calloc((size_t)k + 1, sizeof(Py_ssize_t));
    if (!*arr || !*lens) { PyErr_NoMemory(); return -1; }
    for (Py_ssize_t i = 0; i < k; i++) {
        PyObject *b = PySequence_GetItem(seq, i);
        if (!b) return -1;
        char *s; Py_ssize_t m;
        if (PyBytes_AsStringAndSize(b, &s, &m) < 0) { Py_DECREF(b); return -1; }
        (*arr)[i] = (char *)malloc((size_t)m + 1);
        if (!(*arr)[i]) { Py_DECREF(b); PyErr_NoMemory(); return -1; }
        memcpy((*arr)[i], s, (size_t)m);
        (*lens)[i] = m;
        *count = i + 1;
        Py_DECREF(b);
    }
    return 0;
}

/* configure(entries, verb_cols, other_col, format_substrings, unicode_seps,
 *           ngram_buckets, ngram_head, ngram_tail)
 * entries: list of (word: bytes, cats: int, rank: int) */
static PyObject *scan_configure(PyObject *self, PyObject *args) {
    PyObject *entries, *vcols, *fmts, *seps;
    int oc;
    long nb, nh, ntl;
    if (!PyArg_ParseTuple(args, "OOiOOlll", &entries, &vcols, &oc, &fmts, &seps, &nb, &nh, &ntl))
        return NULL;
    free_config();
    Py_ssize_t k = PySequence_Size(entries);
    if (k < 0) return NULL;
    lex = (Entry *)calloc((size_t)k + 1, sizeof(Entry));
    size_t size = 16;
    while (size < (size_t)k * 4) size <<= 1;
    htab = (int32_t *)malloc(sizeof(int32_t) * size);
    if (!lex || !htab) { free_config(); return PyErr_NoMemory(); }
    hmask = size - 1;
    for (size_t i = 0; i < size; i++) htab[i] = -1;
    for (Py_ssize_t i = 0; i < k; i++) {
        PyObject *it = PySequence_GetItem(entries, i);
        if (!it) { free_config(); return NULL; }
        const char *s; Py_ssize_t m; unsigned int cats; int rank;
        if (!PyArg_ParseTuple(it, "y#Ii", &s, &m, &cats, &rank)) {
            Py_DECREF(it); free_config(); return NULL;
        }
        Entry *e = &lex[i];
        e->s = (char *)malloc((size_t)m + 1);
        if (!e->s) { Py_DECREF(it); free_config(); return PyErr_NoMemory(); }
        memcpy(e->s, s, (size_t)m);
        e->len = m; e->cats = cats; e->rank = rank;
        n_lex = i + 1;
        Py_DECREF(it);
        size_t h = (size_t)fnv((const unsigned char *)e->s, m) & hmask;
        while (htab[h] >= 0) {
            if (lex[htab[h]].len == m && memcmp(lex[htab[h]].s, e->s, (size_t)m) == 0) break;
            h = (h + 1) & hmask;
        }
        if (htab[h] >= 0) { free_config(); PyErr_SetString(PyExc_ValueError, "duplicate lexicon word"); return NULL; }
        htab[h] = (int32_t)i;
    }
    Py_ssize_t nv = PySequence_Size(vcols);
    if (nv < 0 || nv > 64) { free_config(); PyErr_SetString(PyExc_ValueError, "bad verb_cols"); return NULL; }
    for (Py_ssize_t i = 0; i < nv; i++) {
        PyObject *o = PySequence_GetItem(vcols, i);
        if (!o) { free_config(); return NULL; }
        verb_col[i] = (int)PyLong_AsLong(o);
        Py_DECREF(o);
    }
    n_verb_ranks = (int)nv;
    other_col = oc;
    if (copy_bytes_list(fmts, &fmt_sub, &fmt_len, &n_fmt) < 0 || copy_bytes_list(seps, &useps, &usep_len, &n_useps) < 0) {
        free_config(); return NULL;
    }
    ngram_buckets = nb; ngram_head = nh; ngram_tail = ntl;
    if (nb <= 0 || nh < 0 || ntl < 0) { free_config(); PyErr_SetString(PyExc_ValueError, "bad sizes"); return NULL; }
    configured = 1;
    Py_RETURN_NONE;
}

static PyMethodDef methods[] = {
    {"fill", scan_fill, METH_VARARGS, "fill(window_utf8, n_chars, n_chars_window, out, layout): v1/v2 features."},
    {"configure", scan_configure, METH_VARARGS, "configure(...): word lists and sizes from sjf_core.predict._features*."},
    {NULL, NULL, 0, NULL}};

static struct PyModuleDef moddef = {PyModuleDef_HEAD_INIT, "_scan",
                                    "Optional C accelerator of sjf_core's feature extractors.", -1, methods};

PyMODINIT_FUNC PyInit__scan(void) {
    crc_init();
    return PyModule_Create(&moddef);
}
