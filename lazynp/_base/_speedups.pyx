# cython: language_level=3, boundscheck=False, wraparound=False, auto_pickle=False
# cython: c_api_binop_methods=True
"""C versions of the per-operation hot path: ``Node``, ``Var``, ``record``, the binary
dunders of ``lazynp.ndarray``, ufunc calls on lazy arrays and Python scalars, the scan of
live pending arrays that a flush makes, a flush's planning loops (collect, counts, schedule
scan), its bulk loop and the execution of plain nodes, and array data offsets.

Recording one operation in Python costs about 2.5 µs (a Node, a Var and its weakref, the
array, the error site, the tree-kernel structure); NumPy itself spends about 0.5 µs on a
small array.  This module does the same work in C.  It is built by ``pip install`` when a C
compiler is available; without it (or with ``LAZYNP_PURE_PYTHON=1``) lazynp runs the pure
Python versions in ``core/`` (nodes, recorder, trees, executor) and ``_ufunc.py``, which are
the reference for what follows and are tested against it.
"""
cimport cython
cimport numpy as cnp
from cpython.buffer cimport PyObject_GetBuffer
from cpython.contextvars cimport get_value
from cpython.ref cimport PyObject, Py_XDECREF, Py_INCREF
from cpython.tuple cimport PyTuple_New, PyTuple_SET_ITEM, PyTuple_GET_SIZE
from cpython.long cimport PyLong_AsLongLongAndOverflow, PyLong_FromVoidPtr
from cpython.number cimport PyNumber_Index
from cpython.slice cimport PySlice_Unpack, PySlice_AdjustIndices
cdef extern from "Python.h":
    void PyObject_GC_UnTrack(object o)
    void PyObject_GC_Track(object o)
    int PyObject_GC_IsTracked(object o)
from cpython.weakref cimport PyWeakref_NewRef
from cpython.object cimport PyObject_RichCompare, PyObject_TypeCheck
from cpython.number cimport (
    PyNumber_Add, PyNumber_Subtract, PyNumber_Multiply, PyNumber_TrueDivide,
    PyNumber_FloorDivide, PyNumber_Remainder, PyNumber_Power, PyNumber_And, PyNumber_Or,
    PyNumber_Xor, PyNumber_Lshift, PyNumber_Rshift, PyNumber_MatrixMultiply, PyNumber_Divmod,
    PyNumber_InPlaceAdd, PyNumber_InPlaceSubtract, PyNumber_InPlaceMultiply,
    PyNumber_InPlaceTrueDivide, PyNumber_InPlaceFloorDivide, PyNumber_InPlaceRemainder,
    PyNumber_InPlacePower, PyNumber_InPlaceAnd, PyNumber_InPlaceOr, PyNumber_InPlaceXor,
    PyNumber_InPlaceLshift, PyNumber_InPlaceRshift, PyNumber_InPlaceMatrixMultiply,
    PyNumber_Negative, PyNumber_Positive, PyNumber_Absolute, PyNumber_Invert)

cnp.import_array()

cdef extern from *:
    """
    /* setattr on a static (so immutable) extension type: lazynp.ndarray's Python members
       are installed this way once, at import (type_setattro refuses immutable types; with
       the flag lifted for the call it updates the type's dict and slots as for any
       class). */
    static int lz_type_setattr(PyObject *type, PyObject *name, PyObject *value) {
        PyTypeObject *t = (PyTypeObject *)type;
        unsigned long flags = t->tp_flags;
        t->tp_flags &= ~Py_TPFLAGS_IMMUTABLETYPE;
        int r = PyObject_SetAttr(type, name, value);
        t->tp_flags = flags;
        return r;
    }
    static Py_ssize_t lz_refcnt(PyObject *o) { return Py_REFCNT(o); }
    /* The instruction the innermost Python frame is executing: its opcode (-1 when there
       is no Python frame) and, in *arg, its argument byte. */
    static int lz_current_instruction(int *arg) {
        *arg = -1;
        PyFrameObject *f = PyEval_GetFrame();
        if (f == NULL) return -1;
        int lasti = PyFrame_GetLasti(f);
        PyCodeObject *co = PyFrame_GetCode(f);
        PyObject *code = PyCode_GetCode(co);
        Py_DECREF(co);
        if (code == NULL) { PyErr_Clear(); return -1; }
        int op = -1;
        if (lasti >= 0 && lasti + 1 < PyBytes_GET_SIZE(code)) {
            const unsigned char *b = (const unsigned char *)PyBytes_AS_STRING(code);
            op = b[lasti];
            *arg = b[lasti + 1];
        }
        Py_DECREF(code);
        return op;
    }
    /* True when the innermost Python frame is executing a BINARY_OP instruction: the
       operands of the operator being evaluated are then the interpreter's stack entries
       (not borrowed from a list, as in builtin sum, or held by a C caller). */
    static int lz_binop_opcode = -1;
    static int lz_in_binary_op(void) {
        int arg;
        return lz_binop_opcode >= 0 && lz_current_instruction(&arg) == lz_binop_opcode;
    }
    static void lz_set_binop_opcode(int op) { lz_binop_opcode = op; }
    /* Whether the innermost Python frame is evaluating a binary operator that is not an
       in-place one (BINARY_OP with an oparg below the first in-place one) or a comparison
       (COMPARE_OP). */
    static int lz_compare_opcode = -1, lz_first_inplace = 256;
    static void lz_set_operator_opcodes(int compare, int first_inplace) {
        lz_compare_opcode = compare;
        lz_first_inplace = first_inplace;
    }
    static int lz_at_operator(void) {
        if (lz_binop_opcode < 0) return 0;
        int arg;
        int op = lz_current_instruction(&arg);
        return (op == lz_binop_opcode && arg < lz_first_inplace) ||
            (op >= 0 && op == lz_compare_opcode);
    }
    /* the array type is lazynp.ndarray to users (repr, __module__, pickling) */
    static void lz_name_array(PyObject *type) {
        ((PyTypeObject *)type)->tp_name = "lazynp.ndarray";
        PyType_Modified((PyTypeObject *)type);
    }
    /* The innermost Python frame whose file is not inside the package: its code object
       (a new reference, or NULL with *lasti = -1 when there is none) and bytecode offset.
       Whether a code object is inside is cached by address in a small table that holds a
       reference to each code object it names (so an address is never reused under it). */
    #define LZ_CODE_CACHE 256
    static PyObject *lz_code_seen[LZ_CODE_CACHE];
    static char lz_code_inside[LZ_CODE_CACHE];

    static int lz_is_inside(PyObject *code, PyObject *pkg) {
        size_t slot = ((size_t)code >> 4) % LZ_CODE_CACHE;
        if (lz_code_seen[slot] == code) return lz_code_inside[slot];
        PyObject *name = PyObject_GetAttrString(code, "co_filename");
        if (name == NULL) return -1;
        int inside = PyUnicode_Tailmatch(name, pkg, 0, PY_SSIZE_T_MAX, -1) == 1;
        Py_DECREF(name);
        Py_INCREF(code);
        Py_XSETREF(lz_code_seen[slot], code);
        lz_code_inside[slot] = (char)inside;
        return inside;
    }

    static PyObject *lz_user_code(PyObject *pkg, int *lasti) {
        PyFrameObject *f = PyEval_GetFrame();
        Py_XINCREF(f);
        *lasti = -1;
        while (f != NULL) {
            PyCodeObject *c = PyFrame_GetCode(f);
            int inside = lz_is_inside((PyObject *)c, pkg);
            if (inside < 0) { Py_DECREF(c); Py_DECREF(f); return NULL; }
            if (!inside) {
    #if PY_VERSION_HEX >= 0x030B0000
                *lasti = PyFrame_GetLasti(f);
    #else
                PyObject *l = PyObject_GetAttrString((PyObject *)f, "f_lasti");
                *lasti = l ? (int)PyLong_AsLong(l) : -1;
                Py_XDECREF(l);
    #endif
                Py_DECREF(f);
                return (PyObject *)c;
            }
            PyFrameObject *back = PyFrame_GetBack(f);
            Py_DECREF(c);
            Py_DECREF(f);
            f = back;
        }
        Py_RETURN_NONE;
    }

    /* Is bytecode offset ``lasti`` of ``code`` inside a try/with block?  The ranges come
       from lazynp.core.policy.protected_ranges (a tuple start0, end0, start1, end1...), cached
       by code address like lz_code_seen.  -1 with an exception set on failure. */
    #define LZ_PROT_CACHE 256
    static PyObject *lz_prot_code[LZ_PROT_CACHE];
    static PyObject *lz_prot_ranges[LZ_PROT_CACHE];

    static int lz_in_handler_block(PyObject *code, int lasti, PyObject *ranges_fn) {
        size_t slot = ((size_t)code >> 4) % LZ_PROT_CACHE;
        if (lz_prot_code[slot] != code) {
            PyObject *r = PyObject_CallOneArg(ranges_fn, code);
            if (r == NULL) return -1;
            if (!PyTuple_Check(r)) { Py_DECREF(r); PyErr_SetString(PyExc_TypeError, "ranges"); return -1; }
            Py_INCREF(code);
            Py_XSETREF(lz_prot_code[slot], code);
            Py_XSETREF(lz_prot_ranges[slot], r);
        }
        PyObject *t = lz_prot_ranges[slot];
        Py_ssize_t n = PyTuple_GET_SIZE(t);
        for (Py_ssize_t i = 0; i + 1 < n; i += 2) {
            long start = PyLong_AsLong(PyTuple_GET_ITEM(t, i));
            long end = PyLong_AsLong(PyTuple_GET_ITEM(t, i + 1));
            if (start <= lasti && lasti < end) return 1;
        }
        return 0;
    }
    """
    int lz_type_setattr(object type, object name, object value)
    Py_ssize_t lz_refcnt "lz_refcnt"(object o)
    int lz_in_binary_op "lz_in_binary_op"()
    void lz_set_binop_opcode "lz_set_binop_opcode"(int op)
    void lz_set_operator_opcodes(int compare, int first_inplace)
    int lz_at_operator()
    void lz_name_array(object type)
    object lz_user_code(object pkg, int *lasti)
    int lz_in_handler_block(object code, int lasti, object ranges_fn) except -1

DEF PENDING = 0
DEF SCHEDULED = 1
DEF DONE = 2


cdef class Node:
    """One recorded value: ``op(*args, **params)`` with known shape and dtype."""

    cdef public object op, args, params, shape, dtype, value, engine_var, exported, error
    cdef public object flush_epoch, pos, uses, readers_left, needed, errstate, warnings_state
    cdef public int state
    cdef public Py_ssize_t use_count
    cdef object __weakref__
    # ``site`` and ``tree`` (nodes.Node) unpacked: no tuple to allocate per recorded op
    cdef object site_code
    cdef int site_lasti
    cdef bint has_tree
    cdef Py_ssize_t tree_id, tree_size, tree_generation
    cdef object tree_inputs, tree_floats, tree_ints

    def __init__(self, op, args, params, shape, dtype):
        _init_node(self, op, args, params, shape, dtype)

    @property
    def site(self):
        """``(code, bytecode offset)`` of the recording line, or None."""
        return None if self.site_code is None else (self.site_code, self.site_lasti)

    @site.setter
    def site(self, value):
        if value is None:
            self.site_code = None
        else:
            self.site_code, self.site_lasti = value

    @property
    def tree(self):
        """Tree-kernel structure ``(id, inputs, float consts, int consts, size, generation)``
        (kernels/tree.py), or None."""
        if not self.has_tree:
            return None
        return (self.tree_id, self.tree_inputs, self.tree_floats, self.tree_ints, self.tree_size,
                self.tree_generation)

    @tree.setter
    def tree(self, value):
        if value is None:
            self.has_tree = False
            self.tree_inputs = self.tree_floats = self.tree_ints = None
        else:
            self.has_tree = True
            (self.tree_id, self.tree_inputs, self.tree_floats, self.tree_ints, self.tree_size,
             self.tree_generation) = value

    def __repr__(self):
        st = ("pending", "scheduled", "done")[self.state]
        return f"<Node {self.op.name} {self.shape} {self.dtype} {st}>"


cdef inline void _init_node(Node n, op, args, params, shape, dtype):
    n.op = op
    n.args = args
    n.params = params
    n.shape = shape
    n.dtype = dtype
    n.state = PENDING
    n.use_count = 0
    n.exported = False
    n.flush_epoch = 0
    n.needed = False


cdef class Var:
    """A storage resource.  ``head`` is the node with its current contents."""

    cdef public object head, shadow
    cdef object __weakref__

    def __init__(self, head):
        self.head = head
        if head.state == PENDING:
            pending_vars.append(PyWeakref_NewRef(self, None))

    def set_head(self, node):
        self.head = node
        pending_vars.append(PyWeakref_NewRef(self, None))


cdef class RecordState:
    """Counters shared by the recorder and the flushes."""

    cdef public Py_ssize_t pending_count, n_recorded, generation, max_pending


#: weakrefs to Vars that got a pending head since the last flush (state.pending_vars)
pending_vars = []
state = RecordState()

# set once by configure(): objects of core/recorder.py, kernels/tree.py and ndarray.py
cdef object _bound_flush, _extobj_var, _default_ext, _pkg
cdef object _tree_ids, _tree_structure, _merge_inputs
cdef object _flush_fn, _restart_site_fn, _run_untreed_fn, _tree_into_fn
#: core.state.shared.keep_graph (> 0: computed nodes keep their args and params), set by
#: set_keep_graph
cdef Py_ssize_t _keep_graph = 0
# errors and warnings at the call (executor.run_at_call, lazynp.core.policy.run_at_call,
# lazynp.core.late_warnings)
cdef object _protected_ranges = None, _errstate_traps = None, _run_at_call_fn = None
cdef object _warnings_state_fn = None, _log_default = None, _issue_caught = None
# the namespace of the warnings module handed to configure: ``filters`` read from it with one
# dict lookup per recorded op (an attribute lookup on the module: ~200 instructions more)
cdef dict _warnings_ns = None
cdef dict _caught = None
cdef object _w_lst = None, _w_first = None, _w_state = None
cdef Py_ssize_t _w_n = -1
cdef bint _w_traps = False, _w_ignores = False
cdef object _errstate_ignores = None
cdef dict _raises_ops = {}     # op -> 0 (silent), 1 (floating-point errors only), 2 (any)


cdef inline int _raises_on_values(op):
    known = _raises_ops.get(op)
    if known is None:
        known = _raises_ops[op] = (2 - bool(op.fp_errors_only)) if op.raises_on_values else 0
    return <int>known


cdef Py_ssize_t _transforms = 0


def set_transforms(Py_ssize_t n):
    """How many transforms record now (lazynp.core.policy._transforms)."""
    global _transforms
    _transforms = n


cdef bint _run_at_call(int raises, code, int lasti, ext) except -1:
    """lazynp.core.policy.run_at_call (``ws``: _current_wstate() was just called)."""
    if _w_traps or (ext is not _default_ext and _errstate_traps(ext)):
        return True
    if _transforms or code is None or \
            not lz_in_handler_block(code, lasti, _protected_ranges):
        return False
    return not (raises == 1 and
                (_w_ignores or (ext is not _default_ext and _errstate_ignores(ext))))


cdef object _current_wstate():
    """lazynp.core.late_warnings.state(): the same object while ``warnings.filters`` is the same
    list, of the same length, with the same first filter."""
    global _w_lst, _w_first, _w_state, _w_n, _w_traps, _w_ignores
    lst = _warnings_ns.get("filters")
    if lst is _w_lst and type(lst) is list:
        if len(<list>lst) == _w_n and ((<list>lst)[0] if _w_n else None) is _w_first:
            return _w_state
    st = _warnings_state_fn()
    _w_lst = st.lst
    _w_n = st.n
    _w_first = st.first
    _w_state = st
    _w_traps = st.traps
    _w_ignores = st.ignores
    return st
cdef Py_ssize_t _max_tree = 0


def configure(*, bound_flush, extobj_var, default_ext, pkg, tree_ids,
              tree_structure, merge_inputs, max_tree, max_pending,
              flush, restart_site, run_untreed, tree_into, lone_sites, fragment_sites,
              for_op_at_once,
              run_eager, run_now, value_for_eager,
              protected_ranges, errstate_traps, errstate_ignores, run_at_call, warnings_state,
              warnings_module, log_default, caught, issue_caught):
    """Hand the recorder core/recorder.py's objects (called once, when it is imported).

    Every name is required (a missing one is a TypeError): lazynp._base.native.INTERFACE
    lists them.  ``warnings_module`` is read for its ``filters`` list."""
    global _bound_flush, _extobj_var, _default_ext, _pkg, _tree_ids
    global _tree_structure, _merge_inputs, _max_tree
    global _flush_fn, _restart_site_fn, _run_untreed_fn, _tree_into_fn, _lone_sites
    global _for_op_at_once, _fragment_sites
    global _run_eager_fn, _run_now_py, _value_for_eager_fn
    global _protected_ranges, _errstate_traps, _run_at_call_fn, _warnings_state_fn
    global _warnings_ns, _log_default, _caught, _issue_caught, _errstate_ignores
    _errstate_ignores = errstate_ignores
    _protected_ranges = protected_ranges
    _errstate_traps = errstate_traps
    _run_at_call_fn = run_at_call
    _warnings_state_fn = warnings_state
    _warnings_ns = warnings_module.__dict__     # (the handed module's own attributes)
    _log_default = log_default
    _caught = caught
    _issue_caught = issue_caught
    _bound_flush = bound_flush
    _extobj_var = extobj_var
    _default_ext = default_ext
    _pkg = pkg
    _tree_ids = tree_ids
    _tree_structure = tree_structure
    _merge_inputs = merge_inputs
    _max_tree = max_tree
    _flush_fn = flush
    _restart_site_fn = restart_site
    _run_untreed_fn = run_untreed
    _tree_into_fn = tree_into
    _lone_sites = lone_sites
    _for_op_at_once = for_op_at_once
    _fragment_sites = fragment_sites
    _run_eager_fn = run_eager
    _run_now_py = run_now
    _value_for_eager_fn = value_for_eager
    state.max_pending = max_pending


def set_keep_graph(Py_ssize_t n):
    """core.state.shared.keep_graph (recorder.keeping_graph sets it): while > 0, computed nodes keep
    their args and params and no chain is cut into tree kernels."""
    global _keep_graph
    _keep_graph = n


cdef object _array_cls = None      # lazynp.ndarray (the type below)
cdef object _ndarray_np = None
cdef object _VIEW = None, _book_lock = None, _value_of = None
cdef Py_ssize_t _pool_min_bytes = 0     # kernels/pool.MIN_BYTES


# --- the array type: state, metadata and the eager fast paths ----------------------------------
#
# ``lazynp.ndarray`` is this type (its Python members are installed on it by ndarray.py).
# Its state mirrors ``ndarray._CoreReference``: ``_v`` the Var (None while detached), ``_val``
# the NumPy value while detached, ``_shadow``/``_geom`` the view geometry, ``_scalar``.
# The hot paths of eager code are here: element access, basic slicing, small writes, the
# arithmetic and comparison dunders and their in-place forms, iteration.  Each first asks
# the execution policy's question (``_record_all``; every operand computed; the work below
# ``_eager_max`` elements) and then runs NumPy's own operation on the values; otherwise it
# takes the Python path, which records.

cdef int _record_all = 0
cdef Py_ssize_t _eager_max = 65536
#: from this size (below _eager_max) elementwise work joins tree kernels (lazynp.core.policy)
cdef Py_ssize_t _tree_min = 65536
#: below this size a recorded tree kernel runs as one (lazynp.core.policy.TREE_MAX_ELEMS)
cdef Py_ssize_t _tree_max = 65536
cdef Py_ssize_t _n_eager = 0, _n_inplace = 0, _n_elided = 0
cdef object _NE = object()          # "not computed": an operand the fast path cannot take
cdef object _leaf_fn = None, _materialize_fn = None, _empty_fn = None, _ascontig_fn = None
cdef object _getitem_py = None, _setitem_py = None, _writable_py = None, _construct_py = None
cdef object _data_offset_fn = None
cdef type _np_generic = None, _np_integer = None, _np_float64 = None
cdef object _np_dtype = None
cdef object _F64_DTYPE = None      # numpy.dtype(numpy.float64)
cdef object _view_on_fn = None
cdef object _check_buffer_dtype_py = None      # ndarray.check_buffer_dtype
cdef object _array_py = None, _array_ufunc_py = None, _transpose_py = None
cdef list _fwd = [None] * 16, _rev = [None] * 16, _inpl = [None] * 16, _cmp = [None] * 6
# the same recorded paths without NumPy's deferral check, taken when the other operand's
# type is in _never_defer (Python and NumPy numbers, arrays): one Python call less per op
cdef list _fwd_plain = [None] * 16, _inpl_plain = [None] * 16
cdef object _never_defer = frozenset()


# the commonest of those types (lazynp and NumPy arrays, Python floats and ints), each found by
# a pointer compare before the set lookup (~80 instructions per recorded operator)
cdef object _plain0 = None, _plain1 = None, _plain2 = None, _plain3 = None


cdef inline bint _never_defers_to(y) except -1:
    """``type(y) in _never_defer``."""
    t = type(y)
    if t is _plain0 or t is _plain1 or t is _plain2 or t is _plain3:
        return True
    return t in _never_defer
cdef list _unary_py = [None] * 4

DEF K_ADD = 0
DEF K_SUB = 1
DEF K_MUL = 2
DEF K_TRUEDIV = 3
DEF K_FLOORDIV = 4
DEF K_MOD = 5
DEF K_POW = 6
DEF K_AND = 7
DEF K_OR = 8
DEF K_XOR = 9
DEF K_LSHIFT = 10
DEF K_RSHIFT = 11
DEF K_MATMUL = 12
DEF K_DIVMOD = 13
#: in-place + - * / on a C-contiguous target compute into a new array and copy it back up
#: to this many elements with a scalar operand (0.49 us for 64 elements, NumPy's in-place
#: call 0.89 us; even at 2048), and up to the second bound with an array operand (NumPy's
#: array-array call costs less: the new array and the copy lose from ~128 elements, and
#: on a strided target from the start); larger ones are NumPy's call
DEF _INPLACE_LOOP_MAX = 2048
DEF _INPLACE_LOOP_MAX_ARRAYS = 96

#: the dunder names of the binary kinds above (ndarray.py hands their Python paths over)
BINARY_KINDS = ("add", "sub", "mul", "truediv", "floordiv", "mod", "pow", "and", "or", "xor",
                "lshift", "rshift", "matmul", "divmod")


cdef object _sized_kinds = frozenset()
cdef object _tree_op_fn = None       # lazynp.core.policy.tree_op
cdef dict _mid_tree_ops = {}        # op -> its answer
cdef object _op_bounds_fn = None     # lazynp.core.policy.op_bounds
cdef dict _op_bounds = {}           # op -> its answer, for the current numbers
# set once by configure(): recorder.run_eager, recorder.run_now, executor.value_for_eager
cdef object _run_eager_fn = None, _run_now_py = None, _value_for_eager_fn = None


def set_policy(int record_all, Py_ssize_t eager_max, Py_ssize_t tree_min,
               Py_ssize_t tree_max, sized_kinds, tree_op, op_bounds):
    """The execution policy's numbers, and its ``tree_op`` and ``op_bounds`` answers for
    an op, cached per op (lazynp.core.policy._sync; the module docstring there says which
    decisions these numbers make here)."""
    global _record_all, _eager_max, _tree_min, _tree_max, _sized_kinds, _tree_op_fn
    global _op_bounds_fn
    if op_bounds is not _op_bounds_fn or eager_max != _eager_max or tree_min != _tree_min:
        _op_bounds.clear()
        _op_bounds_fn = op_bounds
    _record_all = record_all
    _eager_max = eager_max
    _tree_min = tree_min
    _tree_max = tree_max
    _sized_kinds = sized_kinds
    if tree_op is not _tree_op_fn:
        _mid_tree_ops.clear()
        _tree_op_fn = tree_op


DEF D_RECORD = 0
DEF D_NOW = 1
DEF D_TREE = 2


cdef inline tuple _bounds_of(op):
    """lazynp.core.policy.op_bounds(op): ``(tree_from, record_from)``, cached per op."""
    b = _op_bounds.get(op)
    if b is None:
        b = _op_bounds[op] = tuple(_op_bounds_fn(op))
    return <tuple>b


cdef int _run_now(op, tuple args, shape) except -1:
    """recorder.run_now: D_NOW (node arguments all computed, the work small or of a kind
    fusion cannot improve), D_RECORD, or D_TREE (recorded if it joins a tree kernel), by
    the policy's bounds for ``op`` (lazynp.core.policy.decide); shared, failed and most
    pending arguments are left to recorder.run_now."""
    cdef Py_ssize_t size = _size_of(shape), n, tree_from, record_from
    cdef Node an, r
    cdef bint pending = False
    for a in args:
        if type(a) is Node:
            an = <Node>a
            r = <Node>(an.args[0]) if an.op is _VIEW else an
            if r.exported is True or r.error is not None:
                return _run_now_py(op, args, shape)  # (shared buffers, failures)
            if r.state != DONE or r.value is None:
                pending = True
            n = _size_of(an.shape)
            if n > size:
                size = n
    if size < _tree_min and not pending:
        return D_NOW        # (no op's tree_from is below _tree_min)
    tree_from, record_from = _bounds_of(op)
    if pending:
        # medium elementwise work joins its pending arguments' tree, as in recorder.run_now;
        # anything else, there
        if tree_from <= size < record_from:
            for a in args:
                if type(a) is Node and (<Node>a).dtype.hasobject:
                    return _run_now_py(op, args, shape)
            return D_TREE
        return _run_now_py(op, args, shape)
    if size < tree_from:
        return D_NOW
    for a in args:          # (arrays of Python objects: NumPy's object loops, at once)
        if type(a) is Node and (<Node>a).dtype.hasobject:
            return D_NOW
    return D_TREE if size < record_from else D_RECORD


def eager_counters():
    """Operations the fast paths ran at once, and writes they made in place."""
    return {"ops_eager": _n_eager, "inplace_writes": _n_inplace, "elided": _n_elided}


def reset_eager_counters():
    global _n_eager, _n_inplace, _n_elided
    _n_eager = 0
    _n_inplace = 0
    _n_elided = 0


def configure_array(cls, *, leaf, leaf_op, materialize, getitem, setitem, writable,
                    construct, data_offset, view_on, array, array_ufunc,
                    transpose, check_buffer_dtype):
    """Hand the array type its Python paths (called once, by ndarray.py / _methods.py)."""
    global _array_cls, _leaf_fn, _materialize_fn, _empty_fn, _ascontig_fn, _getitem_py
    global _check_buffer_dtype_py
    _check_buffer_dtype_py = check_buffer_dtype
    global _LEAF
    global _setitem_py, _writable_py, _construct_py, _data_offset_fn
    global _np_generic, _view_on_fn, _ndarray_np, _array_py, _np_integer, _array_ufunc_py
    global _np_dtype, _np_float64, _F64_DTYPE
    global _transpose_py
    import numpy
    _array_py = array
    _array_ufunc_py = array_ufunc
    _transpose_py = transpose
    _ndarray_np = numpy.ndarray
    _view_on_fn = view_on
    _array_cls = cls
    _leaf_fn = leaf
    _LEAF = leaf_op
    _materialize_fn = materialize
    _empty_fn = numpy.empty
    _ascontig_fn = numpy.ascontiguousarray
    _np_generic = numpy.generic
    _np_float64 = numpy.float64
    _F64_DTYPE = numpy.dtype(numpy.float64)
    _np_integer = numpy.integer
    _np_dtype = numpy.dtype
    _getitem_py = getitem
    _setitem_py = setitem
    _writable_py = writable
    _construct_py = construct
    _data_offset_fn = data_offset
    lz_name_array(cls)


cdef object _split_fn = None       # lazynp._base.split.call, or None: never split
cdef Py_ssize_t _split_min = 0          # elements, for a costly ufunc (exp, sin...)
cdef Py_ssize_t _split_min_cheap = 0    # elements, for the others (add, multiply...)
cdef object _split_costly = frozenset()
cdef list _split_ufuncs = [None] * 16    # the NumPy ufunc of a binary dunder kind (K_*)


cdef object _note_blas_fn = None         # lazynp._base.split.note_blas
cdef Py_ssize_t _blas_min = 0
cdef object _blas_functions = frozenset()


def configure_blas_note(note, Py_ssize_t min_elems, functions):
    """``note()`` after a matrix product run at once (``a @ b``, or one of ``functions``)
    whose larger operand has ``min_elems`` elements or more (OpenBLAS's workers then spin a
    while: lazynp._base.split)."""
    global _note_blas_fn, _blas_min, _blas_functions
    _note_blas_fn = note
    _blas_min = min_elems
    _blas_functions = frozenset(functions)


def configure_split(fn, Py_ssize_t min_costly, Py_ssize_t min_cheap, costly,
                    dict ufuncs_by_kind):
    """Large elementwise work run at once on two threads (lazynp._base.split): ``fn(ufunc,
    args)`` gives the result or None; tried from ``min_costly`` elements for the NumPy
    ufuncs in ``costly``, from ``min_cheap`` for the others; ``ufuncs_by_kind``: the
    dunders' NumPy ufuncs by the names of BINARY_KINDS (those that may be split)."""
    global _split_fn, _split_min, _split_min_cheap, _split_costly
    _split_fn = fn
    _split_min = min_costly
    _split_min_cheap = min_cheap
    _split_costly = frozenset(costly)
    for i, name in enumerate(BINARY_KINDS):
        _split_ufuncs[i] = ufuncs_by_kind.get(name)


cdef inline bint _large(v):
    return type(v) is _ndarray_np and cnp.PyArray_SIZE(<cnp.ndarray>v) >= _split_min


cdef inline bint _worth_splitting(uf, v):
    """``uf`` on ``v`` (large: _large) is large enough for its cost to split."""
    return cnp.PyArray_SIZE(<cnp.ndarray>v) >= _split_min_cheap or uf in _split_costly


cdef object _try_split(uf, tuple args):
    """``uf(*args)`` on two threads (lazynp._base.split), or None."""
    if _split_fn is None or uf is None:
        return None
    for a in args:
        if _large(a):
            if _worth_splitting(uf, a):
                return _split_fn(uf, args)
            return None
    return None


def configure_dunders(*, forward, reflected, inplace, compare, unary, forward_plain,
                      inplace_plain, never_defer):
    """The recorded paths of the arithmetic and comparison dunders (from _methods.py):
    dicts by the names of BINARY_KINDS; ``compare`` in rich-comparison order (lt, le, eq,
    ne, gt, ge); ``unary``: neg, pos, abs, invert.  ``forward_plain``/``inplace_plain``: the
    forward and in-place paths without their deferral check, called instead when the other
    operand's type is in ``never_defer``."""
    global _never_defer, _plain0, _plain1, _plain2, _plain3
    import numpy
    _never_defer = frozenset(never_defer)
    _plain0, _plain1, _plain2, _plain3 = [
        t if t in _never_defer else None for t in (ndarray, float, int, numpy.ndarray)]
    for i, name in enumerate(BINARY_KINDS):
        _fwd[i] = forward.get(name)
        _rev[i] = reflected.get(name)
        _inpl[i] = inplace.get(name)
        _fwd_plain[i] = forward_plain.get(name)
        _inpl_plain[i] = inplace_plain.get(name)
    for i in range(6):
        _cmp[i] = compare[i]
    for i in range(4):
        _unary_py[i] = unary[i]


def install_member(cls, name, value):
    """``setattr(cls, name, value)`` on this module's (static, otherwise immutable) type."""
    if lz_type_setattr(cls, name, value) < 0:
        raise AttributeError(name)


cdef extern from *:
    """
    /* A static type's metaclass (its ob_type) set after PyType_Ready: a subclass of type
       with no fields of its own, so the layout is type's.  The static type is never freed,
       so it keeps its reference to the metaclass. */
    static void lz_set_metatype(PyObject *type, PyObject *meta) {
        Py_INCREF(meta);
        Py_SET_TYPE(type, (PyTypeObject *)meta);
    }
    """
    void lz_set_metatype(object type, object meta)


def set_metatype(type cls, type meta):
    """Make ``meta`` (a subclass of ``type`` adding no fields) the metaclass of ``cls``,
    this module's static array type (Cython cannot declare one)."""
    if meta.__basicsize__ != type.__basicsize__ or not issubclass(meta, type):
        raise TypeError("the metaclass must be a subclass of type without fields")
    lz_set_metatype(cls, meta)


cdef inline Py_ssize_t _size_of(shape):
    cdef Py_ssize_t n = 1
    for s in shape:
        n *= <Py_ssize_t>s
    return n


cdef Py_ssize_t _nelems(ndarray a):
    """``a.size`` without building its shape tuple where a NumPy array holds it."""
    cdef object v = a._shadow
    if v is None:
        if a._v is not None:
            return _size_of((<Node>(<Var>a._v).head).shape)
        v = a._val
    if cnp.PyArray_Check(v):
        return cnp.PyArray_SIZE(<cnp.ndarray>v)
    return _size_of(a.shape)


@cython.freelist(256)
cdef class ndarray:
    """A lazy NumPy array.  Use it exactly like :class:`numpy.ndarray`.

    Small work on computed arrays runs at once on NumPy; large or pending work is recorded
    and runs (fused, planned, multi-threaded) when a value is needed: printing, ``float()``,
    ``numpy.asarray()``, ``lazynp.evaluate()``...  ``lazynp.ndarray(shape, dtype, buffer,
    offset, strides, order)`` is NumPy's constructor.
    """

    # _v: the Var (None while detached); _val: the NumPy value while detached; _shadow
    # and _geom_: a view's geometry; _scalar: a 0-d result NumPy gives as a scalar; _ext:
    # a detached array whose buffer the caller holds too (asarray of a NumPy array, or
    # given out by __array__): ops reading or writing it run at once
    cdef public object _v, _val, _shadow
    # _owner: the array a view was made from that owns its memory (``base``, kept alive)
    cdef public object _owner
    cdef object _geom_
    cdef public bint _scalar, _ext
    cdef bint _isview
    cdef object __weakref__

    def __init__(self, shape, dtype=float, buffer=None, offset=0, strides=None, order=None):
        self._val = _construct_py(shape, dtype, buffer, offset, strides, order)
        self._v = None
        self._ext = buffer is not None      # a view of the caller's buffer: shared

    # --- state ------------------------------------------------------------------------
    @property
    def _geom(self):
        if self._isview and self._geom_ is None:
            sh = self._shadow
            self._geom_ = (_data_offset_fn(sh, (<Var>self._v).shadow), sh.shape, sh.strides,
                           sh.dtype)
        return self._geom_

    @_geom.setter
    def _geom(self, value):
        self._geom_ = value
        self._isview = value is not None

    @property
    def _var(self):
        return _attach(self)

    @_var.setter
    def _var(self, value):
        self._v = value
        self._val = None
        _track(self)

    # --- construction -----------------------------------------------------------------
    @classmethod
    def _from_node(cls, node, scalar=False):
        return _new_array(<Node>node, scalar)

    @classmethod
    def _from_value(cls, value):
        return _new_detached(value)

    @classmethod
    def _blank(cls):
        return ndarray.__new__(ndarray)

    # --- reading ----------------------------------------------------------------------
    def _eager_value(self):
        return _evalue(self)

    def _value(self):
        v = _evalue(self)
        if v is not None:
            return v
        return _materialize_fn(_node_of(self))

    def _node(self):
        return _node_of(self)

    def _get_shadow(self):
        return _shadow_of(self)

    @property
    def shape(self):
        if self._shadow is not None:
            return self._shadow.shape
        if self._v is None:
            return self._val.shape
        return (<Node>(<Var>self._v).head).shape

    @shape.setter
    def shape(self, value):
        new = _shadow_of(self).view()
        new.shape = value
        self._rebind_shadow(new)

    @property
    def dtype(self):
        if self._shadow is not None:
            return self._shadow.dtype
        if self._v is None:
            return self._val.dtype
        return (<Node>(<Var>self._v).head).dtype

    @property
    def ndim(self):
        cdef object v = self._shadow
        if v is None and self._v is None:
            v = self._val
        if v is not None:
            return cnp.PyArray_NDIM(<cnp.ndarray>v)
        return len((<Node>(<Var>self._v).head).shape)

    @property
    def size(self):
        return _nelems(self)

    def __len__(self):
        cdef object v = self._shadow
        if v is None and self._v is None:
            v = self._val
        if v is not None:
            if cnp.PyArray_NDIM(<cnp.ndarray>v) == 0:
                raise TypeError("len() of unsized object")
            return cnp.PyArray_DIMS(<cnp.ndarray>v)[0]
        shape = (<Node>(<Var>self._v).head).shape
        if not shape:
            raise TypeError("len() of unsized object")
        return shape[0]

    # --- NumPy's methods: at once on the value when the policy allows, else lazynp's
    # recorded versions (lazynp._numpy.methods) --------------------------------------------------
    def sum(self, *args, **kwargs):
        return _method(self, "sum", "reduction", args, kwargs)

    def prod(self, *args, **kwargs):
        return _method(self, "prod", "reduction", args, kwargs)

    def mean(self, *args, **kwargs):
        return _method(self, "mean", "reduction", args, kwargs)

    def std(self, *args, **kwargs):
        return _method(self, "std", "reduction", args, kwargs)

    def var(self, *args, **kwargs):
        return _method(self, "var", "reduction", args, kwargs)

    def min(self, *args, **kwargs):
        return _method(self, "min", "reduction", args, kwargs)

    def max(self, *args, **kwargs):
        return _method(self, "max", "reduction", args, kwargs)

    def argmin(self, *args, **kwargs):
        return _method(self, "argmin", "reduction", args, kwargs)

    def argmax(self, *args, **kwargs):
        return _method(self, "argmax", "reduction", args, kwargs)

    def all(self, *args, **kwargs):
        return _method(self, "all", "reduction", args, kwargs)

    def any(self, *args, **kwargs):
        return _method(self, "any", "reduction", args, kwargs)

    def cumsum(self, *args, **kwargs):
        return _method(self, "cumsum", "reduction", args, kwargs)

    def cumprod(self, *args, **kwargs):
        return _method(self, "cumprod", "reduction", args, kwargs)

    def clip(self, *args, **kwargs):
        return _method(self, "clip", "elementwise", args, kwargs)

    def copy(self, *args, **kwargs):
        return _method(self, "copy", "elementwise", args, kwargs)

    def astype(self, *args, **kwargs):
        if "copy" in kwargs:        # (copy=False may return this very array: Python path)
            return _method_py["astype"](self, *args, **kwargs)
        return _method(self, "astype", "elementwise", args, kwargs)

    # --- views: NumPy's own view of the shadow, shared with this array when NumPy made one
    # (else, and while a transform records, the Python path: lazynp._numpy.methods) -------------
    def reshape(self, *shape, **kwargs):
        if not _record_all and not kwargs and shape:
            try:
                r = _shadow_view(self, _shadow_of(self).reshape(*shape))
            except (TypeError, ValueError):
                r = None                   # (NumPy's error, from the Python path)
            if r is not None:
                return r
        return _method_py["reshape"](self, *shape, **kwargs)

    def ravel(self, *args, **kwargs):
        cdef object sh
        if not _record_all and not args and not kwargs:
            sh = _shadow_of(self)
            if cnp.PyArray_IS_C_CONTIGUOUS(<cnp.ndarray>sh):
                r = _shadow_view(self, sh.reshape(-1))
                if r is not None:
                    return r
        return _method_py["ravel"](self, *args, **kwargs)

    def transpose(self, *axes):
        if not _record_all:
            try:
                r = _shadow_view(self, _shadow_of(self).transpose(*axes))
            except (TypeError, ValueError):
                r = None
            if r is not None:
                return r
        return _method_py["transpose"](self, *axes)

    @property
    def real(self):
        cdef object sh
        if not _record_all:
            sh = _shadow_of(self)
            if not cnp.PyArray_ISCOMPLEX(<cnp.ndarray>sh):
                return self                # (lazynp.real of a real array: the array)
            r = _shadow_view(self, sh.real)
            if r is not None:
                return r
        return _parts_py[0](self)

    @real.setter
    def real(self, value):
        _parts_py[1](self, value)

    @property
    def imag(self):
        cdef object sh
        if not _record_all:
            sh = _shadow_of(self)
            if cnp.PyArray_ISCOMPLEX(<cnp.ndarray>sh):
                r = _shadow_view(self, sh.imag)
                if r is not None:
                    return r
        return _parts_py[2](self)

    @imag.setter
    def imag(self, value):
        _parts_py[3](self, value)

    # --- indexing ---------------------------------------------------------------------
    def __getitem__(self, index):
        cdef object v
        cdef char *item
        cdef int kind
        if not _record_all:
            v = _evalue(self)
            if v is not None:
                t = type(index)
                kind = lz_index_kind(index, _np_integer)   # 1: integers, 2: other basic
                if kind == 1 and cnp.PyArray_TYPE(<cnp.ndarray>v) != cnp.NPY_VOID:
                    # one element by integers (the commonest index): NumPy's scalar
                    item = _element_ptr(<cnp.ndarray>v, index, t is tuple)
                    if item != NULL:
                        return PyArray_Scalar(item, cnp.PyArray_DESCR(<cnp.ndarray>v), v)
                    if t is not tuple:
                        if cnp.PyArray_NDIM(<cnp.ndarray>v) == 1:
                            return v[index]          # NumPy's scalar (or its IndexError)
                    elif len(<tuple>index) == cnp.PyArray_NDIM(<cnp.ndarray>v):
                        return v[index]
                # (a structured element, a numpy.void viewing the buffer, takes the
                # Python path, which shares the buffer with the caller)
                if kind != 0:
                    sh = _shadow_of(self)
                    r = _basic_view(<cnp.ndarray>sh, index, t is tuple) \
                        if type(sh) is _ndarray_np else None
                    sh = sh[index] if r is None else r
                    if type(sh) is _ndarray_np:
                        return _view_handle(self, sh)
                elif t is ndarray or t is _ndarray_np:
                    # advanced indexing by one array: NumPy's (fresh) result
                    iv = _eager_arg(index, False)
                    if iv is not _NE:
                        return _wrap_fresh(v[iv])
        return _getitem_py(self, index)

    def __setitem__(self, index, value):
        cdef Py_ssize_t region
        cdef char *item
        cdef int kind
        t = type(index)
        if (t is int or t is tuple or isinstance(index, _np_integer)) and self._v is None and \
                not _record_all:
            # one element of a detached (computed, unshared by pending work) array, by
            # Python ints, to a scalar: written at once, as NumPy writes it
            target = self._val
            tv = type(value)
            if (tv is float or tv is int or tv is bool or tv is complex or
                    isinstance(value, _np_generic)) and \
                    cnp.PyArray_ISWRITEABLE(<cnp.ndarray>target) and \
                    cnp.PyArray_TYPE(<cnp.ndarray>target) != cnp.NPY_VOID:
                item = _element_ptr(<cnp.ndarray>target, index, t is tuple)
                if item != NULL:
                    PyArray_Pack(cnp.PyArray_DESCR(<cnp.ndarray>target), item, value)
                    _count_inplace()
                    return
        kind = 0 if _record_all else lz_index_kind(index, _np_integer)
        if type(value) is ndarray and (kind == 1 or type(index) is tuple and
                                       len(<tuple>index) == 0) and \
                _set_object_element(self, index, value):
            return
        if kind != 0:                       # (a basic index; 1: integers only)
            if type(value) is ndarray and _assign_tree(self, index, <ndarray>value):
                return
            vv = _eager_arg(value, True)
            if vv is not _NE:
                t = type(index)
                if kind == 1 and t is not tuple:
                    region = _size_after(self, 1)       # (one element of a 1-D array)
                elif kind == 1:
                    region = _size_after(self, len(<tuple>index))
                else:
                    region = _region_of(self, index)
                target = _writable(self, region)
                if target is not None:
                    if region == 1 and type(target) is _ndarray_np and \
                            cnp.PyArray_ISWRITEABLE(<cnp.ndarray>target) and \
                            cnp.PyArray_TYPE(<cnp.ndarray>target) != cnp.NPY_VOID:
                        item = _element_ptr(<cnp.ndarray>target, index, t is tuple)
                        if item != NULL:
                            PyArray_Pack(cnp.PyArray_DESCR(<cnp.ndarray>target), item, vv)
                            return
                    target[index] = vv
                    return
        if not _record_all and (t is ndarray or t is _ndarray_np):
            # a boolean mask of the array's shape and a scalar: filled in C (lz_mask_fill)
            v = _evalue(self)
            mv = _eager_arg(index, False)
            if v is not None and mv is not _NE and \
                    lz_mask_fill(v, mv, value, 1) == 1:
                target = _writable(self, _nelems(self))
                if target is not None:
                    if lz_mask_fill(target, mv, value, 0) != 1:
                        target[mv] = value
                    return
        _setitem_py(self, index, value)

    def __delitem__(self, index):
        raise ValueError("cannot delete array elements")

    def __getbuffer__(self, Py_buffer *view, int flags):
        # The buffer protocol (memoryview, bytes, struct, hashlib, file writes; NumPy tries
        # it before __array__): the buffer of the value __array__ gives, so it is shared
        # with the caller exactly as numpy.asarray(a) shares it.  view.obj is that NumPy
        # array (its buffer is released through NumPy); Cython's placeholder is dropped.
        cdef PyObject *placeholder = <PyObject*>view.obj
        dtype = self.dtype
        if dtype.kind == "V":
            _check_buffer_dtype_py(dtype)
        value = self.__array__()
        PyObject_GetBuffer(value, view, flags)
        Py_XDECREF(placeholder)

    def __array__(self, dtype=None, copy=None):
        if self._v is None and dtype is None and not copy and not _record_all:
            self._ext = True                 # a detached computed array: its buffer,
            return self._val                # now shared with the caller
        return _array_py(self, dtype, copy)

    @property
    def T(self):
        """The transposed view (NumPy's ``.T``)."""
        if _record_all:
            return _transpose_py(self)
        if len(self.shape) < 2:
            return _view_handle(self, _shadow_of(self)[...]) if self._shadow is None \
                else _view_handle(self, self._shadow)
        return _view_handle(self, _shadow_of(self).T)

    def __array_ufunc__(self, uf, method, *inputs, **kwargs):
        """A NumPy ufunc called on lazynp arrays (also ``numpy_scalar * lazy``): at once on
        the values when the policy allows it, else lazynp's own ufunc (recorded)."""
        cdef list vals
        cdef Py_ssize_t nin = len(inputs)
        if not _record_all and not kwargs and method == "__call__" and not (
                nin == 1 and _to_tree(inputs[0], None, True) or
                nin == 2 and _to_tree(inputs[0], inputs[1], False)):
            vals = []
            for x in inputs:
                v = _eager_arg(x, True)
                if v is _NE:
                    break
                vals.append(v)
            else:
                return _wrap(uf(*vals))
        return _array_ufunc_py(self, uf, method, *inputs, **kwargs)

    def __iter__(self):
        if not self.shape:
            raise TypeError("iteration over a 0-d array")
        return _ArrayIter(self)

    # --- arithmetic (NumPy's number protocol on the values, else the recorded path) ----
    def __add__(x, y):
        return _binop(K_ADD, x, y)

    def __sub__(x, y):
        return _binop(K_SUB, x, y)

    def __mul__(x, y):
        return _binop(K_MUL, x, y)

    def __truediv__(x, y):
        return _binop(K_TRUEDIV, x, y)

    def __floordiv__(x, y):
        return _binop(K_FLOORDIV, x, y)

    def __mod__(x, y):
        return _binop(K_MOD, x, y)

    def __pow__(x, y, z):
        if z is not None:
            return NotImplemented
        return _binop(K_POW, x, y)

    def __and__(x, y):
        return _binop(K_AND, x, y)

    def __or__(x, y):
        return _binop(K_OR, x, y)

    def __xor__(x, y):
        return _binop(K_XOR, x, y)

    def __lshift__(x, y):
        return _binop(K_LSHIFT, x, y)

    def __rshift__(x, y):
        return _binop(K_RSHIFT, x, y)

    def __matmul__(x, y):
        return _binop(K_MATMUL, x, y)

    def __divmod__(x, y):
        return _binop(K_DIVMOD, x, y)

    def __iadd__(self, y):
        return _inplace(K_ADD, self, y)

    def __isub__(self, y):
        return _inplace(K_SUB, self, y)

    def __imul__(self, y):
        return _inplace(K_MUL, self, y)

    def __itruediv__(self, y):
        return _inplace(K_TRUEDIV, self, y)

    def __ifloordiv__(self, y):
        return _inplace(K_FLOORDIV, self, y)

    def __imod__(self, y):
        return _inplace(K_MOD, self, y)

    def __ipow__(self, y):
        return _inplace(K_POW, self, y)

    def __iand__(self, y):
        return _inplace(K_AND, self, y)

    def __ior__(self, y):
        return _inplace(K_OR, self, y)

    def __ixor__(self, y):
        return _inplace(K_XOR, self, y)

    def __ilshift__(self, y):
        return _inplace(K_LSHIFT, self, y)

    def __irshift__(self, y):
        return _inplace(K_RSHIFT, self, y)

    def __imatmul__(self, y):
        return _inplace(K_MATMUL, self, y)

    def __richcmp__(self, other, int op):
        cdef object v, vo
        cdef bint sized = not (_shared(self) or _shared(other))
        if not _record_all and not _to_tree(self, other, False):
            v = _eager_arg(self, sized)
            if v is not _NE:
                vo = _eager_arg(other, sized)
                if vo is not _NE:
                    r = lz_loop2(_cmp_ufuncs[op], v, vo)
                    if r is not None:
                        return _wrap(r)
                    return _wrap(PyObject_RichCompare(v, vo, op))
        return _cmp[op](self, other)

    def __neg__(self):
        return _unop(0, self)

    def __pos__(self):
        return _unop(1, self)

    def __abs__(self):
        return _unop(2, self)

    def __invert__(self):
        return _unop(3, self)


cdef extern from *:
    """
    /* The sequence protocol's item slots of the array type, as NumPy's array_item and
       array_assign_item: PySequence_GetItem/SetItem add the length to a negative index
       before calling them, so an index still negative was out of bounds (-11 on a length
       10 array), and is undone for the IndexError; a NULL value (PySequence_DelItem) is
       NumPy's ValueError.  Cython's own slots would pass -1 on as the last element. */
    static PyObject *lz_index_undone(PyObject *o, Py_ssize_t i) {
        if (i < 0) {
            Py_ssize_t n = PyObject_Length(o);
            if (n < 0)
                return NULL;
            i -= n;
        }
        return PyLong_FromSsize_t(i);
    }
    static PyObject *lz_sq_item(PyObject *o, Py_ssize_t i) {
        PyObject *key = lz_index_undone(o, i), *r;
        if (key == NULL)
            return NULL;
        r = Py_TYPE(o)->tp_as_mapping->mp_subscript(o, key);
        Py_DECREF(key);
        return r;
    }
    static int lz_sq_ass_item(PyObject *o, Py_ssize_t i, PyObject *v) {
        PyObject *key;
        int r;
        if (v == NULL) {
            PyErr_SetString(PyExc_ValueError, "cannot delete array elements");
            return -1;
        }
        key = lz_index_undone(o, i);
        if (key == NULL)
            return -1;
        r = Py_TYPE(o)->tp_as_mapping->mp_ass_subscript(o, key, v);
        Py_DECREF(key);
        return r;
    }
    static void lz_set_sequence_slots(PyObject *type) {
        PySequenceMethods *sq = ((PyTypeObject *)type)->tp_as_sequence;
        sq->sq_item = lz_sq_item;
        sq->sq_ass_item = lz_sq_ass_item;
        PyType_Modified((PyTypeObject *)type);
    }
    """
    void lz_set_sequence_slots(object type)


lz_set_sequence_slots(ndarray)


cdef class _ArrayIter:
    """Iteration over the first axis: ``arr[i]`` for each ``i`` (NumPy's scalars for 1-D)."""

    cdef object arr
    cdef Py_ssize_t i, n

    def __init__(self, arr):
        self.arr = arr
        self.i = 0
        self.n = len(arr)

    def __iter__(self):
        return self

    def __next__(self):
        cdef char *item
        if self.i >= self.n:
            raise StopIteration
        self.i += 1
        if not _record_all:
            # a computed 1-D array: NumPy's scalar read at the element (the live buffer,
            # looked up at each step as NumPy's iterator reads it)
            v = _evalue(<ndarray>self.arr)
            if v is not None and cnp.PyArray_NDIM(<cnp.ndarray>v) == 1 and \
                    cnp.PyArray_TYPE(<cnp.ndarray>v) != cnp.NPY_VOID and \
                    self.i <= cnp.PyArray_DIMS(<cnp.ndarray>v)[0]:
                item = cnp.PyArray_BYTES(<cnp.ndarray>v) + \
                    (self.i - 1) * cnp.PyArray_STRIDES(<cnp.ndarray>v)[0]
                return PyArray_Scalar(item, cnp.PyArray_DESCR(<cnp.ndarray>v), v)
        return self.arr[self.i - 1]



cdef extern from "numpy/arrayobject.h":
    object PyArray_Scalar(void *data, void *descr, object base)
    int PyArray_Pack(void *descr, void *item, object value) except -1


cdef extern from *:
    """
    /* A view of C-contiguous ndarray ``base`` with the given byte offset, shape, strides
       and dtype (``np.ndarray(shape, dtype, buffer=base, offset=..., strides=...)``
       without the buffer protocol); NULL with no error set when the geometry is not one
       this handles or does not fit in ``base`` (the caller then takes NumPy's
       constructor, which raises). */
    static PyObject *lz_view_on(PyObject *base, Py_ssize_t offset, PyObject *shape,
                                PyObject *strides, PyObject *dtype) {
        if (!PyArray_CheckExact(base) || !PyArray_DescrCheck(dtype) ||
                !PyTuple_Check(shape) || !PyTuple_Check(strides)) return NULL;
        PyArrayObject *b = (PyArrayObject *)base;
        PyArray_Descr *d = (PyArray_Descr *)dtype;
        Py_ssize_t nd = PyTuple_GET_SIZE(shape);
        if (nd != PyTuple_GET_SIZE(strides) || nd > NPY_MAXDIMS ||
                !PyArray_IS_C_CONTIGUOUS(b) || PyDataType_HASSUBARRAY(d)) return NULL;
        npy_intp dims[NPY_MAXDIMS], strs[NPY_MAXDIMS];
        npy_intp lo = 0, hi = 0, itemsize = PyDataType_ELSIZE(d);
        int empty = 0;
        for (Py_ssize_t i = 0; i < nd; i++) {
            dims[i] = PyLong_AsSsize_t(PyTuple_GET_ITEM(shape, i));
            strs[i] = PyLong_AsSsize_t(PyTuple_GET_ITEM(strides, i));
            if ((dims[i] == -1 || strs[i] == -1) && PyErr_Occurred()) {
                PyErr_Clear(); return NULL;
            }
            if (dims[i] < 0) return NULL;
            if (dims[i] == 0) empty = 1;
            else if (strs[i] > 0) hi += (dims[i] - 1) * strs[i];
            else lo += (dims[i] - 1) * strs[i];
        }
        if (!empty && (offset + lo < 0 ||
                       offset + hi + itemsize > PyArray_NBYTES(b))) return NULL;
        if (offset < 0 || offset > PyArray_NBYTES(b)) return NULL;
        Py_INCREF(d);
        PyObject *r = PyArray_NewFromDescr(&PyArray_Type, d, (int)nd, dims, strs,
                                           PyArray_BYTES(b) + offset,
                                           PyArray_FLAGS(b) & NPY_ARRAY_WRITEABLE, NULL);
        if (r == NULL) { PyErr_Clear(); return NULL; }
        Py_INCREF(base);
        if (PyArray_SetBaseObject((PyArrayObject *)r, base) < 0) {
            Py_DECREF(r); PyErr_Clear(); return NULL;
        }
        return r;
    }
    """
    PyObject *lz_view_on(object base, Py_ssize_t offset, object shape, object strides,
                         object dtype)


cdef object _view_on(base, tuple g):
    """``nodes.buffer_view(base, *g)`` (a view of geometry ``g`` on a computed buffer), in C
    where the geometry allows."""
    cdef PyObject *r = lz_view_on(base, g[0], g[1], g[2], g[3])
    if r is NULL:
        return _view_on_fn(base, g[0], g[1], g[2], g[3])
    cdef object v = <object>r
    Py_XDECREF(r)
    return v


cdef inline void _count_eager():
    global _n_eager
    _n_eager += 1


cdef inline void _count_inplace():
    global _n_inplace
    _n_inplace += 1


cdef inline bint _axis_offset(x, cnp.npy_intp dim, cnp.npy_intp stride,
                              cnp.npy_intp *off) except -1:
    """``off[0] += i * stride`` for integer ``x`` (a Python or NumPy int) in ``[-dim, dim)``;
    False where NumPy's indexing must decide (another type, out of bounds, overflow)."""
    cdef long long i
    cdef int overflow = 0
    if type(x) is not int:
        if not isinstance(x, _np_integer):
            return False
        x = PyNumber_Index(x)
    i = PyLong_AsLongLongAndOverflow(x, &overflow)
    if overflow:
        return False
    if i < 0:
        i += dim
    if i < 0 or i >= dim:
        return False
    off[0] += i * stride
    return True


cdef inline char *_element_ptr(cnp.ndarray v, index, bint is_tuple) except? NULL:
    """The address of the element a full integer index (``a[i]``, ``a[i, j]``) picks in
    ``v``, or NULL where NumPy's own indexing must decide (other index types, out of bounds:
    NumPy raises its IndexError).  NumPy reads and writes such an index with
    ``PyArray_Scalar`` / ``PyArray_Pack`` at this address too; calling them directly skips
    its index parsing (about half of its time for one element)."""
    cdef int nd = cnp.PyArray_NDIM(v)
    cdef cnp.npy_intp *dims = cnp.PyArray_DIMS(v)
    cdef cnp.npy_intp *strides = cnp.PyArray_STRIDES(v)
    cdef cnp.npy_intp off = 0
    cdef Py_ssize_t k
    if not is_tuple:
        if nd != 1 or not _axis_offset(index, dims[0], strides[0], &off):
            return NULL
        return cnp.PyArray_BYTES(v) + off
    if len(<tuple>index) != nd or nd == 0:
        return NULL
    for k in range(nd):
        if not _axis_offset((<tuple>index)[k], dims[k], strides[k], &off):
            return NULL
    return cnp.PyArray_BYTES(v) + off


cdef bint _set_object_element(ndarray self, index, value) except -1:
    """``a[i, j] = value`` for one element of an object array (``index`` full, or ``()`` on
    a 0-d array), ``value`` a lazynp array: NumPy stores the object itself there, not its
    converted value.  False where this does not apply (the other paths then decide)."""
    cdef char *item
    if self.dtype.num != cnp.NPY_OBJECT:
        return False
    target = _writable(self, 1)
    if type(target) is not _ndarray_np or not cnp.PyArray_ISWRITEABLE(<cnp.ndarray>target):
        return False
    if cnp.PyArray_NDIM(<cnp.ndarray>target) == 0:
        if type(index) is not tuple or len(<tuple>index) != 0:
            return False
        item = cnp.PyArray_BYTES(<cnp.ndarray>target)
    else:
        item = _element_ptr(<cnp.ndarray>target, index, type(index) is tuple)
        if item == NULL:
            return False
    PyArray_Pack(cnp.PyArray_DESCR(<cnp.ndarray>target), item, value)
    return True


cdef extern from "numpy/arrayobject.h":
    object lz_new_from_descr "PyArray_NewFromDescr" (
        PyObject *subtype, PyObject *descr, int nd, cnp.npy_intp *dims,
        cnp.npy_intp *strides, void *data, int flags, PyObject *obj)


cdef inline bint _slice_bound(x) noexcept:
    """A slice bound the view builder takes as it is: None or a Python int."""
    return x is None or type(x) is int


cdef object _basic_view(cnp.ndarray v, index, bint is_tuple):
    """``v[index]`` for a basic index of Python ints and slices with Python-int (or None)
    bounds, fewer integers than ``v`` has axes: the view NumPy makes (the same data
    pointer, shape, strides, flags and base), built from ``v``'s strides without NumPy's
    index parsing; None where NumPy's own indexing must decide (any other index, an
    integer out of bounds, a zero step, a structured dtype)."""
    cdef cnp.npy_intp dims[64]
    cdef cnp.npy_intp strides[64]
    cdef int nd = cnp.PyArray_NDIM(v), k, out = 0, n_items, n_ints = 0
    cdef cnp.npy_intp *vdims = cnp.PyArray_DIMS(v)
    cdef cnp.npy_intp *vstrides = cnp.PyArray_STRIDES(v)
    cdef cnp.npy_intp off = 0
    cdef Py_ssize_t start, stop, step, length
    cdef object item, step_obj
    if cnp.PyArray_TYPE(v) == cnp.NPY_VOID or nd == 0:
        return None
    n_items = len(<tuple>index) if is_tuple else 1
    if n_items > nd:
        return None
    for k in range(n_items):
        item = (<tuple>index)[k] if is_tuple else index
        if type(item) is int:
            if not _axis_offset(item, vdims[k], vstrides[k], &off):
                return None
            n_ints += 1
        elif type(item) is slice:
            if not (_slice_bound((<slice>item).start) and _slice_bound((<slice>item).stop)
                    and _slice_bound((<slice>item).step)):
                return None
            step_obj = (<slice>item).step
            if step_obj is not None and not step_obj:
                return None                 # (a zero step: NumPy's ValueError)
            PySlice_Unpack(item, &start, &stop, &step)
            length = PySlice_AdjustIndices(vdims[k], &start, &stop, step)
            if length <= 0:                 # (NumPy points an empty slice at its start)
                length = 0
                step = 1
                start = 0
            off += vstrides[k] * start
            dims[out] = length
            strides[out] = vstrides[k] * step
            out += 1
        else:
            return None
    if n_ints == nd:
        return None                         # (an element: NumPy's scalar)
    for k in range(n_items, nd):
        dims[out] = vdims[k]
        strides[out] = vstrides[k]
        out += 1
    descr = <object>cnp.PyArray_DESCR(v)
    Py_INCREF(descr)                        # (PyArray_NewFromDescr steals it)
    r = lz_new_from_descr(<PyObject*>_ndarray_np, <PyObject*>descr, out, dims, strides,
                          cnp.PyArray_BYTES(v) + off,
                          cnp.PyArray_FLAGS(v) & ~cnp.NPY_ARRAY_OWNDATA, NULL)
    Py_INCREF(v)                            # (PyArray_SetBaseObject steals it)
    cnp.PyArray_SetBaseObject(<cnp.ndarray>r, v)
    return r


def basic_view(v, index):
    """The view :meth:`ndarray.__getitem__` builds in C for ``v[index]`` (a NumPy array),
    or None where it leaves the index to NumPy (for tests: it must be NumPy's view)."""
    if type(v) is not _ndarray_np:
        return None
    return _basic_view(<cnp.ndarray>v, index, type(index) is tuple)


cdef Py_ssize_t _size_after(ndarray a, Py_ssize_t k) except -1:
    """The product of ``a``'s axes from the ``k``-th on (``_size_of(a.shape[k:])``, without
    the shape tuple and its slice: the elements an integer index of ``k`` items picks)."""
    cdef Py_ssize_t n = 1, i
    cdef object arr = a._shadow if a._shadow is not None else a._val
    cdef cnp.npy_intp *dims
    if arr is not None and type(arr) is _ndarray_np:
        dims = cnp.PyArray_DIMS(<cnp.ndarray>arr)
        for i in range(k, cnp.PyArray_NDIM(<cnp.ndarray>arr)):
            n *= dims[i]
        return n
    # (not a view, and attached: its Var's head has its shape; else the property)
    shape = (<Node>(<Var>a._v).head).shape if a._shadow is None and a._v is not None \
        else a.shape
    for i in range(k, len(shape)):
        n *= <Py_ssize_t>shape[i]
    return n


cdef Py_ssize_t _region_of(ndarray a, index) except -2:
    """Elements written by ``a[index] = ...`` for a basic index (0 when NumPy will raise
    its IndexError at the write)."""
    n = _size_of(a.shape)
    if n < _eager_max:
        return n
    try:
        picked = _shadow_of(a)[index]
    except (IndexError, TypeError, ValueError):
        return 0
    # (an index that picks one element gives NumPy's scalar, not an array)
    return cnp.PyArray_SIZE(<cnp.ndarray>picked) if type(picked) is _ndarray_np else 1


cdef inline bint _all_ints(tuple index):
    for i in index:
        if type(i) is not int and not isinstance(i, _np_integer):
            return False
    return True


cdef inline bint _int_bound(b):
    return b is None or type(b) is int or isinstance(b, _np_integer)


cdef inline bint _basic_item(i):
    t = type(i)
    if t is int or i is None or i is Ellipsis:
        return True
    if t is slice:
        s = <slice>i
        return _int_bound(s.start) and _int_bound(s.stop) and _int_bound(s.step)
    return isinstance(i, _np_integer)


cdef extern from *:
    """
    /* lz_index_kind: 1 when `index` is an integer (Python int or instance of `np_integer`)
       or a tuple of them; 2 when it is another basic index (ints, slices with integer or
       None bounds, None, Ellipsis, or a tuple of these); 0 otherwise.  Borrowed references
       only: the small-index path runs it on every a[i, j] / a[i:, j]. */
    static inline int lz_int_like(PyObject *o, PyTypeObject *np_integer) {
        return PyLong_CheckExact(o) || PyObject_TypeCheck(o, np_integer);
    }
    static inline int lz_bound_ok(PyObject *o, PyTypeObject *np_integer) {
        return o == Py_None || lz_int_like(o, np_integer);
    }
    static inline int lz_item_kind(PyObject *o, PyTypeObject *np_integer) {
        PyTypeObject *t = Py_TYPE(o);
        if (t == &PyLong_Type) return 1;
        if (t == &PySlice_Type) {
            PySliceObject *s = (PySliceObject *)o;
            return (lz_bound_ok(s->start, np_integer) && lz_bound_ok(s->stop, np_integer) &&
                    lz_bound_ok(s->step, np_integer)) ? 2 : 0;
        }
        if (o == Py_None || o == Py_Ellipsis) return 2;
        if (t == &PyTuple_Type) return 0;
        return PyObject_TypeCheck(o, np_integer) ? 1 : 0;
    }
    static inline int lz_index_kind(PyObject *index, PyObject *np_integer) {
        PyTypeObject *npi = (PyTypeObject *)np_integer;
        Py_ssize_t n, k;
        int kind = 1, ik;
        if (!PyTuple_CheckExact(index)) return lz_item_kind(index, npi);
        n = PyTuple_GET_SIZE(index);
        for (k = 0; k < n; k++) {
            ik = lz_item_kind(PyTuple_GET_ITEM(index, k), npi);
            if (ik == 0) return 0;
            if (ik == 2) kind = 2;
        }
        return kind;
    }
    """
    int lz_index_kind(object index, object np_integer)


cdef inline bint _basic(index):
    """A basic index the fast paths take: ints, slices with int bounds, None, Ellipsis."""
    if type(index) is tuple:
        for i in <tuple>index:
            if not _basic_item(i):
                return False
        return True
    return _basic_item(index)


cdef inline object _evalue(ndarray a):
    """``a``'s NumPy value when computed (a view's: a view of the buffer), else None."""
    if a._v is None:
        return a._val
    cdef Var v = <Var>a._v
    cdef Node h = <Node>v.head
    if h.state != DONE or h.value is None or h.error is not None:
        return None
    if not a._isview:
        return h.value
    if v.shadow is h.value:
        return a._shadow
    g = a._geom
    return _view_on(h.value, g)


cdef inline bint _permuted(cnp.ndarray v):
    """``v``'s axes are not in memory order (a transposed view...): lazynp.core.policy.permuted."""
    cdef int i, nd = cnp.PyArray_NDIM(v)
    cdef cnp.npy_intp s, last = -1
    for i in range(nd):
        if cnp.PyArray_DIMS(v)[i] < 2:
            continue
        s = cnp.PyArray_STRIDES(v)[i]
        if s < 0:
            s = -s
        if s == 0:
            continue
        if last >= 0 and s > last:
            return True
        last = s
    return False


cdef inline Py_ssize_t _counted(cnp.ndarray v):
    """Elements ``v`` counts for against the size bound: 0 for arrays of Python objects
    (NumPy's object loops always run at once) and for arrays whose axes are not in memory
    order (lazynp.core.policy.counted_size)."""
    cdef int tn = cnp.PyArray_TYPE(v)
    if tn == cnp.NPY_OBJECT or tn == cnp.NPY_VOID and v.dtype.hasobject:
        return 0
    if _permuted(v):
        return 0
    return cnp.PyArray_SIZE(v)


cdef bint _assign_tree(ndarray self, index, ndarray value) except -1:
    """``self[index] = value`` for a temporary ``value`` that is a pending tree kernel of
    medium size: the kernel writes straight into the region (trees.tree_into)."""
    # (references: a temporary's only one is the caller's stack; its Var's, the temporary's
    # and the argument lz_refcnt is given)
    if value._isview or value._v is None or lz_refcnt(value) > 1 or lz_refcnt(value._v) > 2:
        return False
    cdef Node h = <Node>(<Var>value._v).head
    if h.state != PENDING or not h.has_tree or h.use_count:
        return False
    cdef Py_ssize_t n = _size_of(h.shape)
    if n < _tree_min or n >= _tree_max:
        return False
    # (a large region: the buffer itself when nothing else holds it, as for an assignment
    # run at once, recorder.writable_view's large_in_place)
    target = _writable(self, n) if n < _eager_max else _writable_py(self, n, True)
    if type(target) is not _ndarray_np:
        return False
    dest = target[index]
    if type(dest) is not _ndarray_np or (<object>dest).shape != h.shape or \
            (<object>dest).dtype != h.dtype or not cnp.PyArray_ISWRITEABLE(<cnp.ndarray>dest):
        return False
    return _tree_into_fn(h, dest)


cdef object _tree_side(o):
    """An elementwise operand as a tree kernel takes it (kernels/tree.py): None for a
    constant (Python float, int 0..127), the shape of a lazynp array (computed with a plain
    numeric dtype, or pending as a tree), _NE for anything else."""
    t = type(o)
    if t is float or t is _np_float64:
        return None
    if t is int:
        return None if 0 <= o <= 127 else _NE
    if t is not ndarray:
        return _NE
    cdef ndarray a = <ndarray>o
    if a._ext:
        return _NE
    v = _evalue(a)
    cdef Node h
    if v is None:
        if a._v is None:
            return _NE
        if a._isview:
            # a view of a pending array (``d[:, k:k + 1]`` after ``d = np.minimum(...)``):
            # computed now, as the op run at once would (_eager_arg), and read as an input
            if _operand_size(o) >= _eager_max:
                return _NE
            v = _value_for_eager_fn(_node_of(o))
            if v is None:
                return _NE
        else:
            h = <Node>(<Var>a._v).head
            if h.state != PENDING or not h.has_tree:
                return _NE
            return h.shape
    if type(v) is not _ndarray_np or cnp.PyArray_TYPE(<cnp.ndarray>v) > cnp.NPY_DOUBLE or \
            _permuted(<cnp.ndarray>v):
        # (axes out of memory order: NumPy's call keeps that layout for the next op,
        # lazynp.core.policy.counted_size)
        return _NE
    return (<object>v).shape


cdef inline object _operand_value(ndarray a):
    """What lazynp array ``a`` holds without computing it: its NumPy value (a detached
    array's, a view's shadow) or, attached, its head node (whose shape is the array's)."""
    if a._v is None:
        return a._val
    if a._isview:
        return a._shadow
    return (<Var>a._v).head


cdef object _operand_shape(o):
    """The shape of a lazynp array operand (None for anything else), without computing it."""
    if type(o) is not ndarray:
        return None
    v = _operand_value(<ndarray>o)
    if type(v) is Node:
        return (<Node>v).shape
    if type(v) is not _ndarray_np:
        return None
    return (<object>v).shape


cdef Py_ssize_t _operand_size(o):
    """Elements of a lazynp array operand (1 for anything else), without computing it."""
    if type(o) is not ndarray:
        return 1
    v = _operand_value(<ndarray>o)
    if type(v) is Node:
        return _size_of((<Node>v).shape)
    if type(v) is not _ndarray_np:
        return 1
    return cnp.PyArray_SIZE(<cnp.ndarray>v)


cdef bint _to_tree(x, y, bint unary) except -1:
    """Should ``x (op) y`` (``unary``: ``(op) x``), an elementwise op, be recorded to join a
    tree kernel rather than run at once (lazynp.core.policy.decide: medium work, every operand
    a tree kernel takes; computed arrays may broadcast, a pending tree has the result's
    shape)?"""
    if _tree_min >= _eager_max or _record_all:
        return False
    # (first the cheap bound: a broadcast result has at most the product of the operands'
    # elements; the small ops that run at once pay next to nothing for the question)
    cdef Py_ssize_t nx = _operand_size(x), ny = 1 if unary else _operand_size(y)
    if nx * ny < _tree_min:
        return False
    if nx < _tree_min and ny < _tree_min:
        # (vectors broadcast to the larger one, equal shapes to themselves: the result is
        # small too; NPBench's adi, 98-element rows, paid 0.14 us an op for the question)
        sx = _operand_shape(x)
        sy = None if unary else _operand_shape(y)
        if sx == sy or (sx is None or len(<tuple>sx) <= 1) and \
                (sy is None or len(<tuple>sy) <= 1):
            return False
    if _reads_shared(x) or not unary and _reads_shared(y):
        return False        # (runs at once, policy.decide_on_nodes: on NumPy's fast path)
    sx = _tree_side(x)
    if sx is _NE:
        return False
    if unary:
        sy = None
    else:
        sy = _tree_side(y)
        if sy is _NE:
            return False
    if sx is None:
        if sy is None:
            return False
        shape = sy
    elif sy is None or sx == sy:
        shape = sx
    else:
        try:
            shape = _broadcast_shapes(sx, sy)
        except ValueError:
            return False        # (NumPy's error, at the call)
        if shape != sx and _evalue(<ndarray>x) is None or \
                shape != sy and _evalue(<ndarray>y) is None:
            return False        # (a pending tree is not broadcast: it has the result's shape)
    cdef Py_ssize_t n = _size_of(shape)
    if n < _tree_min or n >= _eager_max:
        return False
    cdef int lasti = 0
    if _lone_sites or _fragment_sites:
        code = lz_user_code(_pkg, &lasti)
        if code is not None:
            key = _site_key(code, lasti)
            if n < _lone_sites.get(key, 0):
                return False
            if n < _fragment_sites.get(key, 0) and not _pending(x) and \
                    (unary or not _pending(y)):
                return False        # (a fragment's line starts no new tree)
    return True


cdef inline tuple _site_key(code, int lasti):
    """state.site_key of the user line ``(code, lasti)``: ``(id(code), lasti)``."""
    return (PyLong_FromVoidPtr(<void *>code), lasti)


cdef inline bint _pending(o):
    """A lazynp array operand whose value is pending (a tree it would join)."""
    return type(o) is ndarray and _evalue(<ndarray>o) is None


cdef tuple _broadcast_shapes(tuple a, tuple b):
    """``numpy.broadcast_shapes(a, b)`` without its arrays (about 5 us a call, paid by every
    medium broadcast op: conv2d's ``x[:, i:i + K, j:j + K, :, None] * w[None]``); ValueError
    where NumPy raises one."""
    cdef Py_ssize_t na = len(a), nb = len(b), n = na if na > nb else nb, k
    out = [None] * n
    for k in range(n):
        da = a[k - n + na] if k - n + na >= 0 else 1
        db = b[k - n + nb] if k - n + nb >= 0 else 1
        if da == db or db == 1:
            out[k] = da
        elif da == 1:
            out[k] = db
        else:
            raise ValueError("shape mismatch: objects cannot be broadcast to a single shape")
    return tuple(out)


#: state.lone_sites: user lines whose medium elementwise op headed trees that did not pay
#: (that op alone: the next statement read it, nothing to fuse; or too little work) -> the
#: number of elements below which they run at once
cdef dict _lone_sites = {}
#: state.fragment_sites: lines whose ops made fragments of too little work -> the number of
#: elements below which they start no new tree (joining a pending one still)
cdef dict _fragment_sites = {}
#: core/trees.py's ``for_op_at_once``: [> 0 while an elementwise op run at once computes
#: its pending arguments] (the trees it flushes are the short ends of chains, not lines
#: computed alone)
cdef list _for_op_at_once = [0]


cdef inline object _elementwise_arg(o, bint sized):
    """:func:`_eager_arg` of an elementwise op run at once (``for_op_at_once`` raised while
    it computes a pending operand)."""
    if type(o) is ndarray and _evalue(<ndarray>o) is None:
        _for_op_at_once[0] += 1
        try:
            return _eager_arg(o, sized)
        finally:
            _for_op_at_once[0] -= 1
    return _eager_arg(o, sized)


cdef inline object _eager_arg(o, bint sized):
    """An operand's value for an operation run at once, or _NE: a computed lazynp array
    (below the size bound when ``sized``), a Python or NumPy scalar, an exact NumPy array."""
    t = type(o)
    cdef object v
    if t is ndarray:
        v = _evalue(<ndarray>o)
        if v is None:
            # pending: a small one is computed now (small work gains nothing from
            # joining its graph), a large one is recorded with
            if sized and _nelems(<ndarray>o) >= _eager_max:
                return _NE
            v = _value_for_eager_fn(_node_of(o))
            if v is None:
                return _NE
        if sized and _counted(<cnp.ndarray>v) >= _eager_max:
            return _NE
        return v
    if t is float or t is int or t is bool or t is complex:
        return o
    if t is _ndarray_np:
        if sized and _counted(<cnp.ndarray>o) >= _eager_max:
            return _NE
        return o
    if isinstance(o, _np_generic):
        return o
    return _NE


cdef inline bint _reads_shared(o):
    """:func:`_shared`, or a view of an array whose buffer the caller's NumPy code holds
    (``lazynp.asarray(a)[1:]``): an op reading it runs at once (policy.decide_on_nodes), so
    it joins no tree kernel."""
    if type(o) is not ndarray:
        return False
    cdef ndarray a = <ndarray>o
    if a._v is None:
        return a._ext
    cdef Node h = <Node>(<Var>a._v).head
    return h.state == DONE and h.error is None and h.exported is True


cdef inline bint _shared(o):
    """A detached computed lazynp array whose buffer the caller's NumPy code holds too
    (``_ext``).  The policy runs every op reading one at once, at any size
    (``policy.decide_on_nodes``: shared); the C paths below do the same here, where NumPy's
    temporary elision and the two-thread split apply, instead of the recorder's at-once
    path (which has neither: a chain on ``asarray`` inputs of 2^19-2^21 elements ran at
    0.44-0.63x NumPy's speed)."""
    if type(o) is not ndarray:
        return False
    cdef ndarray a = <ndarray>o
    if a._v is None:
        return a._ext
    if a._isview:
        return False
    cdef Node h = <Node>(<Var>a._v).head
    return h.state == DONE and h.error is None and h.exported is True


cdef object _wrap(r):
    """A NumPy result as lazynp returns it: a detached computed array (C-ordered), NumPy's
    scalars as they are, tuples element by element."""
    global _n_eager
    if type(r) is _ndarray_np:
        _n_eager += 1
        if not cnp.PyArray_IS_C_CONTIGUOUS(<cnp.ndarray>r):
            return _wrap_py(r, ())       # NumPy's memory layout kept (lazynp._numpy.eager.wrap)
        return _new_detached(r)
    if type(r) is tuple:
        return tuple([_wrap(x) for x in <tuple>r])
    _n_eager += 1
    return r


cdef object _wrap_fresh(r):
    """``_wrap`` for a NumPy result that may not own its data (0-d, or a view NumPy
    returned): copied then."""
    if type(r) is _ndarray_np and cnp.PyArray_BASE(<cnp.ndarray>r) != NULL:
        r = r.copy()
    return _wrap(r)


cdef object _NOT_EAGER = None, _SLOW = object()
cdef object _try_call_py = None, _try_method_py = None, _wrap_py = None


def configure_eager(*, not_eager, try_call, try_method, wrap):
    """The Python versions of :func:`eager_call`/:func:`eager_method` (lazynp._numpy.eager),
    taken for the arguments the C versions do not handle."""
    global _NOT_EAGER, _try_call_py, _try_method_py, _wrap_py
    _NOT_EAGER = not_eager
    _try_call_py = try_call
    _try_method_py = try_method
    _wrap_py = wrap


cdef object _call_arg(o, bint sized, Py_ssize_t* maxsize):
    """An argument of a NumPy call run at once: its value, _NE (record instead) or _SLOW
    (the Python version decides: lists holding arrays, other objects)."""
    t = type(o)
    cdef object v
    cdef Py_ssize_t n
    if t is ndarray:
        v = _evalue(<ndarray>o)
        if v is None:
            if sized and _nelems(<ndarray>o) >= _eager_max:
                return _NE
            v = _value_for_eager_fn(_node_of(o))
            if v is None:
                return _NE
        n = _counted(<cnp.ndarray>v)
        if n > maxsize[0]:
            maxsize[0] = n
        return v
    if t is _ndarray_np:
        n = _counted(<cnp.ndarray>o)
        if n > maxsize[0]:
            maxsize[0] = n
        return o
    if t is float or t is int or t is bool or o is None or t is str or t is complex or \
            isinstance(o, _np_generic) or t is type or isinstance(o, _np_dtype):
        return o                        # (scalars, and dtypes: np.float64, float, 'f8'...)
    if t is tuple or t is list:
        # a shape (a tuple of ints) as it is; a sequence of arrays (concatenate, stack...)
        # with each array's value
        if t is tuple:
            for x in <tuple>o:
                if type(x) is not int:
                    break
            else:
                return o
        return _call_seq(o, sized, maxsize)
    return _SLOW


cdef object _call_seq(o, bint sized, Py_ssize_t* maxsize):
    """_call_arg for a list or tuple of arrays and scalars: the same sequence of values,
    _NE or _SLOW (nested sequences, other objects: the Python version)."""
    cdef list vals = []
    for x in o:
        tx = type(x)
        if tx is ndarray or tx is _ndarray_np or tx is float or tx is int or \
                isinstance(x, _np_generic):
            v = _call_arg(x, sized, maxsize)
            if v is _NE or v is _SLOW:
                return v
            vals.append(v)
        else:
            return _SLOW
    return vals if type(o) is list else tuple(vals)


cdef object _wrap_result(r, tuple inputs):
    """``_eager.wrap`` in C for a plain NumPy result (arrays that own their data)."""
    global _n_eager
    t = type(r)
    if t is _ndarray_np:
        if cnp.PyArray_IS_C_CONTIGUOUS(<cnp.ndarray>r) and \
                cnp.PyArray_BASE(<cnp.ndarray>r) == NULL:
            _n_eager += 1
            return _new_detached(r)
    elif isinstance(r, _np_generic) or t is float or t is int or t is bool or r is None:
        _n_eager += 1
        return r
    _n_eager += 1
    return _wrap_py(r, inputs)     # tuples (named ones too), lists, other objects


def eager_call(fn, tuple args, dict kwargs, kind):
    """``_eager.try_call(fn, args, kwargs, kind)``: NumPy's ``fn`` at once when the policy
    allows it, else lazynp._numpy.eager.NOT_EAGER."""
    return _eager_call(fn, args, kwargs, kind)


cdef inline bint _is_pending(o):
    """A lazynp array whose value is not computed."""
    return type(o) is ndarray and _evalue(<ndarray>o) is None


cdef class EagerFirst:
    """``lazynp._numpy.eager.eager_first`` in C: a namespace function that first tries NumPy's
    ``np_fn`` at once (the policy allowing), else calls lazynp's ``lazy_fn``.  Carries
    ``lazy_fn``'s name, docstring and signature (``__wrapped__``)."""

    cdef readonly object np_fn, lazy_fn, kind, name
    # np_fn's implementation behind NumPy's __array_function__ dispatch (None: it has none),
    # called directly when every argument is a plain NumPy array or scalar (_undispatched)
    cdef object np_impl
    cdef dict __dict__
    cdef object _sized_for     # the _sized_kinds that _sized was computed from
    cdef bint _sized
    # matmul: a call on a pending first operand goes to the recorder (it may close that
    # operand's fused kernel: core/fusion.py's matvec_operands), not at once here
    cdef bint _pending_first_records
    cdef void *_vectorcall     # _eager_first_vectorcall (the type's tp_vectorcall_offset)

    def __init__(self, np_fn, lazy_fn, kind):
        self.np_fn = np_fn
        self.lazy_fn = lazy_fn
        self.kind = kind
        self.name = np_fn.__name__
        self.np_impl = getattr(np_fn, "_implementation", None) \
            if type(np_fn) is _array_function_dispatcher else None
        self._pending_first_records = np_fn is _numpy.matmul
        self._vectorcall = <void *>_eager_first_vectorcall

    def __call__(self, *args, **kwargs):
        return self._call(args, kwargs)

    cdef object _call(self, tuple args, dict kwargs):
        """The call, ``kwargs`` None when there are none (a positional vectorcall)."""
        if _device_dispatch is not None and (_device_hook or (kwargs and "device" in kwargs)):
            # (device hook: lazynp.devices, once a device array or default device exists)
            r = _device_dispatch(self.name, self.np_fn, self.lazy_fn, args,
                                 kwargs if kwargs is not None else {})
            if r is not _NOT_EAGER:
                return r
        if not _record_all and not (self._pending_first_records and args and
                                    _is_pending(args[0])):
            if self._sized_for is not _sized_kinds:
                self._sized = self.kind in _sized_kinds
                self._sized_for = _sized_kinds
            r = _eager_call_sized(self.np_fn, args, kwargs, self.kind, self._sized,
                                  self.np_impl)
            if r is not _NOT_EAGER:
                return r
        if kwargs is None:
            return self.lazy_fn(*args)
        return self.lazy_fn(*args, **kwargs)

    def __repr__(self):
        return f"<function {getattr(self, '__qualname__', '?')}>"

    def __reduce__(self):
        # (by name, as functions pickle)
        return (_namespace_member, (getattr(self, "__module__"), getattr(self, "__name__")))


cdef extern from *:
    """
    /* EagerFirst takes Python's vectorcall protocol (PEP 590): a positional call skips
       the argument tuple and keyword dict that tp_call makes, the commonest case in a
       loop of small calls (np.dot(x, y)). */
    static void lz_enable_vectorcall(PyObject *type, PyObject *instance, void **slot) {
        PyTypeObject *t = (PyTypeObject *)type;
        t->tp_vectorcall_offset = (Py_ssize_t)((char *)slot - (char *)instance);
        t->tp_flags |= Py_TPFLAGS_HAVE_VECTORCALL;
    }
    static PyObject *lz_args_tuple(PyObject *const *args, size_t nargsf) {
        Py_ssize_t n = PyVectorcall_NARGS(nargsf), i;
        PyObject *t = PyTuple_New(n);
        if (t == NULL) return NULL;
        for (i = 0; i < n; i++) {
            Py_INCREF(args[i]);
            PyTuple_SET_ITEM(t, i, args[i]);
        }
        return t;
    }
    /* The type's tp_call with the tuple and dict a call with keywords gives. */
    static PyObject *lz_tp_call_kwnames(PyObject *self, PyObject *const *args, size_t nargsf,
                                        PyObject *kwnames) {
        Py_ssize_t n = PyVectorcall_NARGS(nargsf), k;
        Py_ssize_t nk = kwnames == NULL ? 0 : PyTuple_GET_SIZE(kwnames);
        PyObject *t, *d, *r = NULL;
        t = lz_args_tuple(args, nargsf);
        if (t == NULL) return NULL;
        d = PyDict_New();
        if (d == NULL) { Py_DECREF(t); return NULL; }
        for (k = 0; k < nk; k++)
            if (PyDict_SetItem(d, PyTuple_GET_ITEM(kwnames, k), args[n + k]) < 0) goto done;
        r = Py_TYPE(self)->tp_call(self, t, d);
    done:
        Py_DECREF(t);
        Py_DECREF(d);
        return r;
    }
    """
    void lz_enable_vectorcall(object type, object instance, void **slot)
    tuple lz_args_tuple(PyObject **args, size_t nargsf)
    object lz_vectorcall "PyObject_Vectorcall" (object fn, PyObject **args, size_t nargsf,
                                                 PyObject *kwnames)
    size_t lz_nargs "PyVectorcall_NARGS" (size_t nargsf)
    object lz_tp_call_kwnames(object self, PyObject **args, size_t nargsf, PyObject *kwnames)


DEF _FAST_ARGS = 4      # positional calls up to this many arguments: no tuples (below)


cdef object _eager_first_vectorcall(EagerFirst self, PyObject **args, size_t nargsf,
                                    PyObject *kwnames):
    cdef size_t n = lz_nargs(nargsf)
    if kwnames != NULL and PyTuple_GET_SIZE(<object>kwnames) != 0:
        return lz_tp_call_kwnames(self, args, nargsf, kwnames)
    if n <= _FAST_ARGS and not _record_all and \
            (_device_dispatch is None or not _device_hook) and \
            not (self._pending_first_records and n and _is_pending(<object>args[0])):
        r = _eager_positional(self, args, n)
        if r is not _SLOW:
            return r
    return self._call(lz_args_tuple(args, nargsf), None)


cdef object _eager_positional(EagerFirst self, PyObject **args, size_t n):
    """EagerFirst's call of NumPy's function at once for up to _FAST_ARGS positional
    arguments, the values passed to it by vectorcall (no argument tuples); _SLOW where the
    general path decides (a pending or large array, another argument kind, a row split)."""
    cdef PyObject *vals[_FAST_ARGS]
    cdef Py_ssize_t maxsize = 0, i, held = 0
    if self._sized_for is not _sized_kinds:
        self._sized = self.kind in _sized_kinds
        self._sized_for = _sized_kinds
    try:
        for i in range(<Py_ssize_t>n):
            v = _call_arg(<object>args[i], self._sized, &maxsize)
            if v is _NE or v is _SLOW:
                return _SLOW
            Py_INCREF(v)                # (held in vals until the call returns)
            vals[i] = <PyObject *>v
            held += 1
        if (self._sized and maxsize >= _eager_max) or maxsize >= _split_min_rows:
            return _SLOW
        if self.np_impl is not None and _undispatched(vals, n):
            try:
                r = lz_vectorcall(self.np_impl, vals, n, NULL)
            except TypeError:
                # (NumPy's dispatcher binds the arguments first and names the function in
                # its TypeError; any other error is the implementation's own, raised as is:
                # calling again would run the work's side effects twice)
                r = lz_vectorcall(self.np_fn, vals, n, NULL)
        else:
            r = lz_vectorcall(self.np_fn, vals, n, NULL)
        if maxsize >= _blas_min and _note_blas_fn is not None and \
                self.np_fn in _blas_functions:
            _note_blas_fn()         # (a product on BLAS's threads: lazynp._base.split)
        t = type(r)
        if (t is _ndarray_np and cnp.PyArray_IS_C_CONTIGUOUS(<cnp.ndarray>r) and
                cnp.PyArray_BASE(<cnp.ndarray>r) == NULL) or isinstance(r, _np_generic) or \
                t is float or t is int or t is bool or r is None:
            return _wrap_result(r, ())  # (these results do not look at the inputs)
        return _wrap_result(r, lz_args_tuple(vals, n))
    finally:
        for i in range(held):
            Py_XDECREF(vals[i])


cdef object _array_function_dispatcher = None   # numpy._ArrayFunctionDispatcher
cdef object _exact_np_scalars = frozenset()       # NumPy's own scalar types (not subclasses)


cdef inline bint _plain_value(v):
    """An argument no ``__array_function__`` override can come from: an exact NumPy array,
    a Python number or string, None, an exact NumPy scalar, a dtype, a class, or a tuple of
    Python ints (a shape or axes)."""
    t = type(v)
    if t is _ndarray_np or t is float or t is int or t is bool or v is None or \
            t is complex or t is str or t is type or t in _exact_np_scalars or \
            (_np_dtype is not None and isinstance(v, _np_dtype)):
        return True
    if t is tuple:
        for x in <tuple>v:
            if type(x) is not int:
                return False
        return True
    return False


cdef bint _undispatched(PyObject **vals, size_t n):
    """Would NumPy's ``__array_function__`` dispatch of these arguments call the function's
    implementation itself?  True when each is a _plain_value (none of them overrides the
    dispatch): NumPy's dispatcher then adds only its own cost (~1,000 instructions a call)."""
    cdef size_t i
    for i in range(n):
        if not _plain_value(<object>vals[i]):
            return False
    return True


cdef object _call_numpy(fn, impl, tuple vals, dict kw):
    """``fn(*vals, **kw)`` (``kw`` may be None), through ``impl``, ``fn``'s implementation
    behind NumPy's dispatch, when every argument is a _plain_value; on a TypeError there,
    ``fn`` itself (NumPy's dispatcher binds the arguments first: its own message); any other
    error is raised as is (a second call would run the work's side effects twice)."""
    if impl is not None:
        for v in vals:
            if not _plain_value(v):
                return fn(*vals, **kw) if kw else fn(*vals)
        if kw:
            for v in kw.values():
                if not _plain_value(v):
                    return fn(*vals, **kw)
        try:
            return impl(*vals, **kw) if kw else impl(*vals)
        except TypeError:
            pass
    return fn(*vals, **kw) if kw else fn(*vals)


cdef void _enable_eager_first_vectorcall():
    cdef EagerFirst probe = EagerFirst.__new__(EagerFirst)
    lz_enable_vectorcall(EagerFirst, probe, &probe._vectorcall)


_enable_eager_first_vectorcall()


cdef bint _device_hook = False     # lazynp.devices.HOOK (set_device_hook)
cdef object _device_dispatch = None


def configure_device_hook(*, dispatch):
    """The eager-first functions' device hook (lazynp.devices.dispatch, tried while
    ``devices.HOOK`` is set, see :func:`set_device_hook`, or a ``device=`` is given)."""
    global _device_dispatch
    _device_dispatch = dispatch


def set_device_hook(bint on):
    """lazynp.devices.HOOK (a device array exists, or a default device is open): the
    eager-first functions try the device hook first."""
    global _device_hook
    _device_hook = on


def _namespace_member(module, name):
    import importlib
    return getattr(importlib.import_module(module), name)


cdef object _eager_call(fn, tuple args, dict kwargs, kind):
    return _eager_call_sized(fn, args, kwargs, kind, kind in _sized_kinds)


cdef object _eager_call_sized(fn, tuple args, dict kwargs, kind, bint sized, impl=None):
    """_eager_call with ``kind in _sized_kinds`` given (the caller keeps it); ``impl``:
    ``fn``'s implementation behind NumPy's dispatch (EagerFirst.np_impl), or None."""
    if _record_all:
        return _NOT_EAGER
    cdef Py_ssize_t maxsize = 0, i, j, n = len(args)
    cdef tuple vals = args
    cdef tuple replaced = None
    cdef dict kw
    for i in range(n):
        a = args[i]
        v = _call_arg(a, sized, &maxsize)
        if v is _NE:
            return _NOT_EAGER
        if v is _SLOW:
            return _try_call_py(fn, args, kwargs if kwargs is not None else {}, kind)
        if v is not a and replaced is None:   # (a lazy argument: its value instead)
            replaced = PyTuple_New(n)
            for j in range(i):
                x = args[j]
                Py_INCREF(x)
                PyTuple_SET_ITEM(replaced, j, x)
        if replaced is not None:
            Py_INCREF(v)
            PyTuple_SET_ITEM(replaced, i, v)
    if replaced is not None:
        vals = replaced
    if kwargs:
        kw = {}
        for k, a in kwargs.items():
            if k == "out" and a is not None:
                return _NOT_EAGER
            v = _call_arg(a, sized, &maxsize)
            if v is _NE:
                return _NOT_EAGER
            if v is _SLOW:
                return _try_call_py(fn, args, kwargs if kwargs is not None else {}, kind)
            kw[k] = v
        if sized and maxsize >= _eager_max:
            return _NOT_EAGER
        if maxsize >= _split_min_rows:
            return _wrap_result(_split_rows(fn, vals, kw), vals)
        r = _call_numpy(fn, impl, vals, kw)
    else:
        if sized and maxsize >= _eager_max:
            return _NOT_EAGER
        if maxsize >= _split_min_rows:
            return _wrap_result(_split_rows(fn, vals, {}), vals)
        r = _call_numpy(fn, impl, vals, None)
    if maxsize >= _blas_min and _note_blas_fn is not None and fn in _blas_functions:
        _note_blas_fn()         # (a product on BLAS's threads: lazynp._base.split)
    return _wrap_result(r, vals)


cdef object _split_rows = None
cdef Py_ssize_t _split_min_rows = (<Py_ssize_t>1) << 62


def configure_row_split(run, Py_ssize_t min_elems):
    """NumPy calls run at once on arrays from ``min_elems`` elements go through ``run(fn,
    args, kwargs)`` (lazynp._base.split.run: functions of independent rows on two threads)."""
    global _split_rows, _split_min_rows
    _split_rows = run
    _split_min_rows = min_elems


#: The ndarray methods the C type defines (``sum``, ``copy``...) -> lazynp._numpy.methods'
#: Python versions (the recorded path, when NumPy's method may not run at once).
METHOD_NAMES = ("sum", "prod", "mean", "std", "var", "min", "max", "argmin", "argmax", "all",
                "any", "cumsum", "cumprod", "clip", "copy", "astype", "reshape", "ravel",
                "transpose")
cdef dict _method_py = {}


cdef dict _method_shortcuts = {}


def short_sum(a):
    """``lz_short_sum``: ``add.reduce(a, axis=-1)`` of a C-ordered float array with a last
    axis of 2 to 7 elements, or None (see lazynp._numpy.shortcuts)."""
    return lz_short_sum(a)


def mask_fill(target, mask, value):
    """``lz_mask_fill``: ``target[mask] = value`` for a boolean mask of target's shape and a
    scalar value of its type, without branches; False when it does not apply (nothing
    written: the caller makes NumPy's assignment)."""
    return lz_mask_fill(target, mask, value, 0) == 1


def configure_methods(dict python_methods, dict shortcuts):
    """The recorded (Python) versions of :data:`METHOD_NAMES`, and the methods run at once
    by a shortcut (lazynp._numpy.shortcuts.METHODS) instead of NumPy's own method."""
    _method_py.update(python_methods)
    _method_shortcuts.update(shortcuts)


cdef object _method(ndarray self, name, kind, tuple args, dict kwargs):
    r = _eager_method(self, name, args, kwargs, kind)
    if r is _NOT_EAGER:
        return _method_py[name](self, *args, **kwargs)
    return r


def eager_method(arr, name, tuple args, dict kwargs, kind):
    """``_eager.try_method``: NumPy's own method ``name`` on ``arr``'s value at once, or
    NOT_EAGER."""
    return _eager_method(arr, name, args, kwargs, kind)


cdef object _eager_method(arr, name, tuple args, dict kwargs, kind):
    if _record_all or type(arr) is not ndarray:
        return _try_method_py(arr, name, args, kwargs, kind)
    cdef bint sized = kind in _sized_kinds
    cdef Py_ssize_t maxsize = 0
    v = _call_arg(arr, sized, &maxsize)
    if v is _NE:
        return _NOT_EAGER
    if sized and maxsize >= _eager_max:
        return _NOT_EAGER
    shortcut = _method_shortcuts.get(name)
    if args or kwargs:
        if sized and _has_lazy_big(args, kwargs):
            return _NOT_EAGER
        if shortcut is not None:
            return _eager_call(shortcut, (v,) + args, kwargs, "opaque")
        return _eager_call(getattr(v, name), args, kwargs, "opaque")
    if shortcut is not None:
        return _wrap_result(shortcut(v), (v,))
    if name == "max" or name == "min":
        r = lz_int_extreme(v, name == "max")
        if r is not None:
            _count_eager()
            return r
    return _wrap_result(getattr(v, name)(), (v,))


cdef bint _has_lazy_big(tuple args, dict kwargs):
    """An argument that is a large lazynp array (a sized method's work is then large)."""
    for a in args:
        if type(a) is ndarray and _nelems(<ndarray>a) >= _eager_max and \
                not (<ndarray>a).dtype.hasobject:
            return True
    if kwargs:
        for a in kwargs.values():
            if type(a) is ndarray and _nelems(<ndarray>a) >= _eager_max and \
                    not (<ndarray>a).dtype.hasobject:
                return True
    return False


cdef object _new_detached(value):
    cdef ndarray a = ndarray.__new__(ndarray)
    a._val = value
    # A detached array holds a NumPy array only: like NumPy's arrays it is left out of the
    # cycle collector (fewer, shorter collections in loops that make many small arrays);
    # it is tracked again when it gets a Var (_attach).
    PyObject_GC_UnTrack(a)
    return a


cdef object _new_array(Node node, bint scalar):
    """``ndarray._from_node(node, scalar)``: NumPy's scalar for a scalar result (a pending
    one is computed now, in one flush with its pending inputs, unless everything records),
    else the array on a new Var (weakly listed while its head is pending)."""
    if scalar and not _record_all:
        if node.state != DONE:
            _materialize_fn(node)       # (raises the node's error, as NumPy at the call)
        if node.value is not None and node.error is None:
            return node.value[()]
    cdef Var v = Var.__new__(Var)
    v.head = node
    if node.state == PENDING:
        pending_vars.append(PyWeakref_NewRef(v, None))
    cdef ndarray a = ndarray.__new__(ndarray)
    a._v = v
    a._scalar = scalar
    return a


cdef object _LEAF = None       # nodes.LEAF


cdef Node _leaf(value, bint exported):
    """recorder.leaf in C: a computed node holding ``value``."""
    cdef Node n = Node.__new__(Node)
    _init_node(n, _LEAF, (), None, value.shape, value.dtype)
    n.value = value
    n.state = DONE
    n.exported = exported
    return n


cdef Var _attach(ndarray a):
    """``a``'s Var; a detached array gets one now (a computed leaf holding its value)."""
    cdef Var v
    if a._v is None:
        v = Var.__new__(Var)
        v.head = _leaf(a._val, a._ext) if _LEAF is not None and type(a._val) is _ndarray_np \
            else _leaf_fn(a._val, a._ext)
        a._v = v
        a._val = None
        _track(a)
    return <Var>a._v


cdef inline void _track(a):
    if not PyObject_GC_IsTracked(a):
        PyObject_GC_Track(a)


cdef object _shadow_of(ndarray a):
    """``a._get_shadow()``: a view's own shadow, else its Var's (the computed head's
    buffer, else an uncommitted array of its shape)."""
    if a._shadow is not None:
        return a._shadow
    cdef Var v
    if a._v is not None:
        v = <Var>a._v
        if v.shadow is not None and v.shadow is (<Node>v.head).value:
            return v.shadow             # (the commonest case: the computed head's buffer)
    v = _attach(a)
    cdef Node h = <Node>v.head
    if v.shadow is None:
        if h.state == DONE and h.error is None and type(h.value) is _ndarray_np:
            v.shadow = h.value
        else:
            v.shadow = _empty_fn(h.shape, h.dtype)
    cdef object old = v.shadow
    if old is not h.value and lz_refcnt(old) == 2 and h.state == DONE and \
            h.error is None and type(h.value) is _ndarray_np and _same_geometry(old, h.value):
        # The shadow was made while the head was pending (or is an older version's buffer)
        # and nothing views it any more (every NumPy view of it holds a reference): views
        # from now on are made on the buffer itself, so that reading or writing them takes
        # the C path (their geometry is the same on either array).  (2 references: the
        # Var's and ``old``.)
        v.shadow = h.value
    return v.shadow


cdef bint _same_geometry(a, b):
    return a.shape == b.shape and a.strides == b.strides and a.dtype == b.dtype


cdef list _parts_py = [None] * 4    # real's getter and setter, imag's (lazynp.ndarray)


def configure_parts(real, imag):
    """The Python ``real`` and ``imag`` properties (taken for what the C ones leave)."""
    _parts_py[:] = [real.fget, real.fset, imag.fget, imag.fset]


cdef object _shadow_view(ndarray a, sh):
    """A view of ``a`` with NumPy array ``sh`` as its shadow when ``sh`` is a non-empty view
    NumPy made of ``a``'s Var's shadow (its base chain leads there), else None."""
    if type(sh) is not _ndarray_np or cnp.PyArray_SIZE(<cnp.ndarray>sh) == 0:
        return None
    cdef object target = (<Var>_attach(a)).shadow
    cdef object b = sh
    cdef int i
    for i in range(4):
        if b is target:
            return _view_handle(a, sh)
        if type(b) is not _ndarray_np or cnp.PyArray_BASE(<cnp.ndarray>b) == NULL:
            return None
        b = <object>cnp.PyArray_BASE(<cnp.ndarray>b)
    return None


cdef object _view_handle(ndarray base, sh):
    """A view of ``base`` with NumPy view ``sh`` of its shadow (geometry computed when
    asked for)."""
    cdef ndarray r = ndarray.__new__(ndarray)
    r._v = base._v if base._v is not None else _attach(base)
    r._shadow = sh
    r._isview = True
    r._owner = base._owner if base._isview else base
    return r


cdef inline object _node_of(a):
    """``a._node()``: the head of its Var, or a view node for a view."""
    cdef ndarray arr = <ndarray>a
    cdef Var v = _attach(arr)
    if not arr._isview:
        return v.head
    g = arr._geom
    return _view_node(<Node>v.head, g[0], g[1], g[2], g[3])


cdef Node _view_node(Node base, offset, shape, strides, dtype):
    """recorder.view_node: a view of ``base``'s buffer (never executed alone; realized by
    its consumers), on the open trace's tape.  (Each view a stencil's tree reads is one:
    about 1.5 us in Python.)"""
    cdef Node n = Node.__new__(Node)
    _init_node(n, _VIEW, (base,), {"offset": offset, "shape": shape, "strides": strides,
                                   "dtype": dtype}, shape, dtype)
    base.use_count += 1
    if _tape is not None and not _tape_paused:
        _tape.append(n)
    return n


def view_node(Node base, offset, shape, strides, dtype):
    """:func:`_view_node`: recorder.view_node when the extension is built."""
    return _view_node(base, offset, shape, strides, dtype)


cdef tuple _merge_inputs_c(tuple ins, tuple more):
    """kernels/tree.py's ``merge_inputs``: ``ins`` extended by the inputs of ``more`` it
    lacks (inputs are nodes: the same one is the same object), and where each of ``more``
    landed."""
    cdef list merged = list(ins)
    cdef list remap = []
    cdef Py_ssize_t j, n, found
    for x in more:
        n = len(merged)
        found = -1
        for j in range(n):
            if merged[j] is x:
                found = j
                break
        if found < 0:
            found = n
            merged.append(x)
        remap.append(found)
    return tuple(merged), tuple(remap)


def value_of(a):
    """core/nodes.py's ``value_of``: an argument's value once its producer has run, a view
    realized on its base's buffer (in C: each view a tree kernel reads is one, about 1 us
    through NumPy's constructor)."""
    if type(a) is not Node:
        return a
    cdef Node n = <Node>a
    cdef Node b
    if n.op is _VIEW:
        b = <Node>n.args[0]
        if b.error is not None:
            raise b.error
        p = n.params
        return _view_on(b.value, (p["offset"], p["shape"], p["strides"], p["dtype"]))
    if n.error is not None:
        raise n.error
    return n.value


def merge_inputs(tuple ins, tuple more):
    """:func:`_merge_inputs_c` (for tests)."""
    return _merge_inputs_c(ins, more)


cdef object _writable(ndarray a, Py_ssize_t region):
    """The NumPy array through which ``a`` may be written at once (recorder.writable_view):
    here when nothing but ``a``'s Var holds its current version, else the Python path."""
    global _n_inplace
    if _record_all:
        return None
    if a._v is None:
        if region >= _eager_max and not a._ext:
            return None
        _n_inplace += 1
        return a._val
    if region >= _eager_max:
        return _writable_py(a, region)     # (a buffer shared with the user: at once)
    cdef Var v = <Var>a._v
    cdef Node h = <Node>v.head
    if h.state != DONE and h.error is None:
        return _writable_py(a, region)     # (computes the pending array first)
    if h.state != DONE or h.value is None or h.error is not None or \
            type(h.value) is not _ndarray_np:
        return None
    if lz_refcnt(h) > 2:
        return _writable_py(a, region)     # (copy-on-write)
    sh = a._shadow
    if sh is not None and v.shadow is not h.value:
        # a view made while its base was pending (its shadow is not the buffer): the
        # same geometry on the buffer, read-only where the view is
        if not cnp.PyArray_ISWRITEABLE(<cnp.ndarray>sh):
            return _writable_py(a, region)
        g = a._geom
        _n_inplace += 1
        return _view_on(h.value, g)
    _n_inplace += 1
    if sh is None:
        return h.value
    return sh


cdef object _number_op(int k, a, b):
    if k == K_ADD:
        return PyNumber_Add(a, b)
    if k == K_SUB:
        return PyNumber_Subtract(a, b)
    if k == K_MUL:
        return PyNumber_Multiply(a, b)
    if k == K_TRUEDIV:
        return PyNumber_TrueDivide(a, b)
    if k == K_FLOORDIV:
        return PyNumber_FloorDivide(a, b)
    if k == K_MOD:
        return PyNumber_Remainder(a, b)
    if k == K_POW:
        return PyNumber_Power(a, b, None)
    if k == K_AND:
        return PyNumber_And(a, b)
    if k == K_OR:
        return PyNumber_Or(a, b)
    if k == K_XOR:
        return PyNumber_Xor(a, b)
    if k == K_LSHIFT:
        return PyNumber_Lshift(a, b)
    if k == K_RSHIFT:
        return PyNumber_Rshift(a, b)
    if k == K_MATMUL:
        return PyNumber_MatrixMultiply(a, b)
    return PyNumber_Divmod(a, b)


cdef object _inplace_op(int k, a, b):
    if k <= K_TRUEDIV and type(a) is _ndarray_np and \
            cnp.PyArray_SIZE(<cnp.ndarray>a) <= (
                _INPLACE_LOOP_MAX_ARRAYS if type(b) is _ndarray_np else _INPLACE_LOOP_MAX) and \
            cnp.PyArray_IS_C_CONTIGUOUS(<cnp.ndarray>a):
        # a small operand: NumPy's loop into a new array (None on a float flag: NumPy's
        # call then runs on the untouched target, with its warnings), copied into place
        r = lz_loop2(_arith_ufuncs[k], a, b)
        if r is not None and lz_copy_into(a, r):
            return a
    if k == K_ADD:
        return PyNumber_InPlaceAdd(a, b)
    if k == K_SUB:
        return PyNumber_InPlaceSubtract(a, b)
    if k == K_MUL:
        return PyNumber_InPlaceMultiply(a, b)
    if k == K_TRUEDIV:
        return PyNumber_InPlaceTrueDivide(a, b)
    if k == K_FLOORDIV:
        return PyNumber_InPlaceFloorDivide(a, b)
    if k == K_MOD:
        return PyNumber_InPlaceRemainder(a, b)
    if k == K_POW:
        return PyNumber_InPlacePower(a, b, None)
    if k == K_AND:
        return PyNumber_InPlaceAnd(a, b)
    if k == K_OR:
        return PyNumber_InPlaceOr(a, b)
    if k == K_XOR:
        return PyNumber_InPlaceXor(a, b)
    if k == K_LSHIFT:
        return PyNumber_InPlaceLshift(a, b)
    if k == K_RSHIFT:
        return PyNumber_InPlaceRshift(a, b)
    return PyNumber_InPlaceMatrixMultiply(a, b)


cdef object _binop(int k, x, y):
    """``x (op) y`` with ``x`` or ``y`` a lazynp array: at once on the values when the
    policy allows it (matmul at any size), else the recorded path."""
    cdef object vx, vy, r
    cdef bint sized = k != K_MATMUL, elementwise
    if not _record_all and not (sized and k != K_DIVMOD and _to_tree(x, y, False)) and \
            not (k == K_MATMUL and _is_pending(x)):
        # (a product of a pending matrix is the recorder's: it may close that matrix's
        # fused kernel, core/fusion.py's matvec_operands)
        elementwise = sized
        if sized and (_shared(x) or _shared(y)):
            sized = False
        vx = _elementwise_arg(x, sized) if elementwise else _eager_arg(x, sized)
        if vx is not _NE:
            vy = _elementwise_arg(y, sized) if elementwise else _eager_arg(y, sized)
            if vy is not _NE:
                if _split_fn is not None and (_large(vx) or _large(vy)):
                    # (before NumPy's elision: on two threads a large op is faster than in
                    # place on one, cpu_fusion's W1 on shared inputs 1.19x -> 1.03x NumPy's
                    # with the elision first; the split's fresh result costs memory)
                    r = _try_split(_split_ufuncs[k], (vx, vy))
                    if r is not None:
                        return _wrap(r)
                if k <= K_TRUEDIV:
                    r = _elide(k, x, y, vx, vy)
                    if r is not None:
                        return r
                    r = lz_loop2(_arith_ufuncs[k], vx, vy)
                    if r is not None:
                        return _wrap(r)
                elif k == K_MATMUL and type(vx) is _ndarray_np and type(vy) is _ndarray_np:
                    r = lz_vector_dot(vx, vy)
                    if r is not None:
                        return _wrap(r)
                    r = _number_op(k, vx, vy)
                    if _note_blas_fn is not None and (
                            cnp.PyArray_SIZE(<cnp.ndarray>vx) >= _blas_min or
                            cnp.PyArray_SIZE(<cnp.ndarray>vy) >= _blas_min):
                        _note_blas_fn()
                    return _wrap(r)
                return _wrap(_number_op(k, vx, vy))
    if isinstance(x, ndarray):
        f = _fwd_plain[k] if _never_defers_to(y) else _fwd[k]
        return f(x, y) if f is not None else NotImplemented
    f = _rev[k]
    return f(y, x) if f is not None else NotImplemented


cdef extern from *:
    """
    #include <fenv.h>
    /* ``a @ b`` of two 1-D NumPy arrays of one BLAS dtype (float32/64, complex64/128),
       aligned and in native byte order: NumPy's matmul loop calls the dtype's dot function
       (``DOUBLE_dot``...: BLAS ``dot`` for positive strides, else its own loop) with the two
       arrays' data and strides, and returns the 0-d result as a scalar.  The same call made
       here skips the ufunc machinery around it (~0.85 us of ~1 us for short vectors).  A
       floating-point flag raised by the call: None, and the caller makes NumPy's own call,
       which warns or raises as the errstate says.  None too where NumPy's call could differ
       in any way. */
    static PyObject *lz_vector_dot(PyObject *a, PyObject *b) {
        PyArrayObject *x = (PyArrayObject *)a, *y = (PyArrayObject *)b;
        if (PyArray_NDIM(x) != 1 || PyArray_NDIM(y) != 1) Py_RETURN_NONE;
        npy_intp n = PyArray_DIM(x, 0);
        if (n < 1 || n != PyArray_DIM(y, 0)) Py_RETURN_NONE;
        PyArray_Descr *d = PyArray_DESCR(x);
        int t = d->type_num;
        if (PyArray_DESCR(y) != d && !PyArray_EquivTypes(PyArray_DESCR(y), d)) Py_RETURN_NONE;
        if (t != NPY_DOUBLE && t != NPY_FLOAT && t != NPY_CDOUBLE && t != NPY_CFLOAT)
            Py_RETURN_NONE;
        if (!PyArray_ISALIGNED(x) || !PyArray_ISALIGNED(y) ||
                !PyArray_ISNOTSWAPPED(x) || !PyArray_ISNOTSWAPPED(y) ||
                PyDataType_HASFIELDS(d) || d->metadata != NULL) Py_RETURN_NONE;
        PyArray_DotFunc *dot = PyDataType_GetArrFuncs(d)->dotfunc;
        if (dot == NULL) Py_RETURN_NONE;
        double out[4];
        const int flags = FE_DIVBYZERO | FE_OVERFLOW | FE_UNDERFLOW | FE_INVALID;
        feclearexcept(flags);
        dot(PyArray_DATA(x), PyArray_STRIDE(x, 0), PyArray_DATA(y), PyArray_STRIDE(y, 0),
            (void *)out, n, NULL);
        if (fetestexcept(flags)) Py_RETURN_NONE;
        return PyArray_Scalar((void *)out, d, NULL);
    }
    """
    object lz_vector_dot(object a, object b)


cdef extern from *:
    """
    #include "numpy/ufuncobject.h"
    /* ``uf(x, y)`` (lz_loop2: float64/float32 or integer operands) or ``uf(x)`` (lz_loop1:
       float64/float32) on small operands computed at once, for the ufuncs whose every element is one IEEE operation or an
       exact one (+ - * /, maximum, minimum, comparisons, negative, absolute, sqrt: the
       caller's list): NumPy's own loop for the dtype (the ufunc's ``functions`` entry
       NumPy's call ends up running) called on the operands' data, without the ufunc
       machinery around it (~0.35 us of ~0.45 us for 100 elements).  Correctly rounded
       element by element, the result does not depend on how the loop walks the elements.
       Taken only where NumPy's result is a new C-ordered array (of the operands' dtype, or
       bool) with no broadcasting: same-shape 1-D or row-major 2-D arrays (positive
       strides), or one of them with a scalar of the array's own dtype (a Python float for
       float64).  A floating-point flag raised (overflow, 0/0...): None, and the caller makes
       NumPy's call, which warns or raises as the errstate says.  None too for anything
       else. */
    static int lz_rowmajor(PyArrayObject *a) {
        int nd = PyArray_NDIM(a);
        if (nd == 1) return PyArray_STRIDE(a, 0) > 0 || PyArray_DIM(a, 0) == 1;
        if (nd != 2) return 0;
        npy_intp s0 = PyArray_STRIDE(a, 0), s1 = PyArray_STRIDE(a, 1);
        npy_intp d0 = PyArray_DIM(a, 0), d1 = PyArray_DIM(a, 1);
        if (d0 == 1) return s1 > 0 || d1 == 1;
        if (d1 == 1) return s0 > 0;
        return s1 > 0 && s0 >= s1 * d1;
    }
    static int lz_loop_operand(PyObject *o, int t) {
        PyArrayObject *a = (PyArrayObject *)o;
        return PyArray_TYPE(a) == t && PyArray_ISALIGNED(a) && PyArray_ISNOTSWAPPED(a) &&
            PyArray_SIZE(a) > 0 && lz_rowmajor(a);
    }
    /* ``uf``'s inner loop for ``nin`` inputs of type ``t`` and one output of type ``t`` (or
       bool, for two inputs: comparisons): its output type, with the function and its data;
       -1 when the ufunc has no such loop. */
    static int lz_find_loop(PyUFuncObject *uf, int nin, int t, PyUFuncGenericFunction *fn,
                            void **data) {
        if (uf->nin != nin || uf->nout != 1) return -1;
        for (int i = 0; i < uf->ntypes; i++) {
            const char *tp = uf->types + i * uf->nargs;
            if (tp[0] != t || (nin == 2 && tp[1] != t)) continue;
            if (tp[nin] == t || (nin == 2 && tp[nin] == NPY_BOOL)) {
                *fn = uf->functions[i];
                *data = uf->data != NULL ? uf->data[i] : NULL;
                return tp[nin];
            }
        }
        return -1;
    }
    /* Run ``uf``'s loop for inputs of type ``t`` (output ``t``, or bool for comparisons)
       over the operands ``ops`` (``nin`` of them; a NULL one is the scalar at ``scalar``)
       into a new C-ordered array of ``shape``'s shape, row by row for 2-D operands.  None
       when the ufunc has no such loop or the loop raised a floating-point flag. */
    static PyObject *lz_run_rows(PyUFuncObject *uf, int nin, PyArrayObject **ops,
                                 void *scalar, PyArrayObject *shape, int t) {
        PyUFuncGenericFunction fn; void *data;
        int tout = lz_find_loop(uf, nin, t, &fn, &data);
        if (tout < 0) Py_RETURN_NONE;
        int nd = PyArray_NDIM(shape);
        PyArrayObject *out = (PyArrayObject *)PyArray_SimpleNew(nd, PyArray_DIMS(shape), tout);
        if (out == NULL) return NULL;
        npy_intp rows = nd == 2 ? PyArray_DIM(shape, 0) : 1;
        npy_intp cols = PyArray_DIM(shape, nd - 1);
        int contiguous = 1;       /* all C-contiguous: one call over every element */
        for (int k = 0; k < nin; k++)
            if (ops[k] != NULL && !PyArray_IS_C_CONTIGUOUS(ops[k])) contiguous = 0;
        if (contiguous && nd == 2) {
            cols *= rows;
            rows = 1;
            nd = 1;
        }
        npy_intp item = PyArray_ITEMSIZE(out);
        const int flags = FE_DIVBYZERO | FE_OVERFLOW | FE_UNDERFLOW | FE_INVALID;
        feclearexcept(flags);
        for (npy_intp r = 0; r < rows; r++) {
            char *args[3];
            npy_intp steps[3], n = cols;
            for (int k = 0; k < nin; k++) {
                PyArrayObject *o = ops[k];
                if (o == NULL) {
                    args[k] = (char *)scalar;
                    steps[k] = 0;
                } else {
                    args[k] = PyArray_BYTES(o) + (nd == 2 ? r * PyArray_STRIDE(o, 0) : 0);
                    steps[k] = contiguous ? PyArray_ITEMSIZE(o)
                                          : PyArray_STRIDE(o, PyArray_NDIM(o) - 1);
                }
            }
            args[nin] = PyArray_BYTES(out) + r * cols * item;
            steps[nin] = item;
            fn(args, &n, steps, data);
        }
        if (fetestexcept(flags)) {
            Py_DECREF(out);
            Py_RETURN_NONE;
        }
        return (PyObject *)out;
    }
    /* Axes in row-major order, gaps allowed (a basic-slicing view of a C-ordered array):
       positive strides, each axis of length > 1 at least as far apart as the later ones
       span.  NumPy's result of broadcasting such operands is C-ordered. */
    static int lz_rowmajor_nd(PyArrayObject *a) {
        npy_intp span = 0;
        for (int i = PyArray_NDIM(a) - 1; i >= 0; i--) {
            npy_intp d = PyArray_DIM(a, i), s = PyArray_STRIDE(a, i);
            if (d == 1) continue;
            if (s <= 0 || s < span) return 0;
            span = s * d;
        }
        return 1;
    }
    #define LZ_MAXDIM 8
    /* ``uf(x, y)`` for two arrays of type ``t`` of different shapes that broadcast (or of one
       shape, more than 2-D): NumPy's loop called along the result's longest axis when the
       last is short (under 8 elements, the other at least 4x longer); None (NumPy's call)
       when the last axis would be walked anyway, except for 1-D results.
       NumPy walks a broadcast result along its last axis, one loop call per row: a
       (600, 1, 2) - (1, 4, 2) difference is 2400 calls of 2 elements (37 us), 8 calls of 600
       here (each element is one correctly rounded or exact operation: the order of the walk
       does not change it).  None where the shapes do not broadcast (NumPy raises), for empty
       results, operands not in row-major order, or a raised floating-point flag. */
    static PyObject *lz_run_broadcast(PyUFuncObject *uf, PyArrayObject *x, PyArrayObject *y,
                                      int t) {
        int nx = PyArray_NDIM(x), ny = PyArray_NDIM(y), nd = nx > ny ? nx : ny;
        if (nx == 0 || ny == 0 || nd > LZ_MAXDIM || !PyArray_ISALIGNED(x) ||
                !PyArray_ISALIGNED(y) || !PyArray_ISNOTSWAPPED(x) || !PyArray_ISNOTSWAPPED(y) ||
                !lz_rowmajor_nd(x) || !lz_rowmajor_nd(y))
            Py_RETURN_NONE;
        PyUFuncGenericFunction fn; void *data;
        int tout = lz_find_loop(uf, 2, t, &fn, &data);
        if (tout < 0) Py_RETURN_NONE;
        npy_intp dims[LZ_MAXDIM], sx[LZ_MAXDIM], sy[LZ_MAXDIM], so[LZ_MAXDIM], idx[LZ_MAXDIM];
        int inner = nd - 1;
        for (int i = 0; i < nd; i++) {
            int ix = i - (nd - nx), iy = i - (nd - ny);
            npy_intp dx = ix >= 0 ? PyArray_DIM(x, ix) : 1, dy = iy >= 0 ? PyArray_DIM(y, iy) : 1;
            if (dx != dy && dx != 1 && dy != 1) Py_RETURN_NONE;
            dims[i] = dx == 1 ? dy : dx;
            if (dims[i] == 0) Py_RETURN_NONE;
            sx[i] = dx > 1 ? PyArray_STRIDE(x, ix) : 0;
            sy[i] = dy > 1 ? PyArray_STRIDE(y, iy) : 0;
            idx[i] = 0;
        }
        if (dims[nd - 1] < 8)       /* (a longer last axis stays inner: memory order) */
            for (int i = nd - 2; i >= 0; i--)
                if (dims[i] > dims[inner] && dims[i] >= 4 * dims[nd - 1]) inner = i;
        if (inner == nd - 1 && nd > 1)
            Py_RETURN_NONE;         /* NumPy's own walk (it coalesces contiguous axes) */
        PyArrayObject *out = (PyArrayObject *)PyArray_SimpleNew(nd, dims, tout);
        if (out == NULL) return NULL;
        for (int i = 0; i < nd; i++) so[i] = PyArray_STRIDE(out, i);
        char *px = PyArray_BYTES(x), *py = PyArray_BYTES(y), *po = PyArray_BYTES(out);
        npy_intp n = dims[inner], steps[3] = {sx[inner], sy[inner], so[inner]};
        const int flags = FE_DIVBYZERO | FE_OVERFLOW | FE_UNDERFLOW | FE_INVALID;
        feclearexcept(flags);
        for (;;) {
            char *args[3] = {px, py, po};
            fn(args, &n, steps, data);
            int i = nd - 1;
            for (; i >= 0; i--) {             /* the next position of the other axes */
                if (i == inner) continue;
                if (++idx[i] < dims[i]) {
                    px += sx[i]; py += sy[i]; po += so[i];
                    break;
                }
                idx[i] = 0;
                px -= sx[i] * (dims[i] - 1); py -= sy[i] * (dims[i] - 1);
                po -= so[i] * (dims[i] - 1);
            }
            if (i < 0) break;
        }
        if (fetestexcept(flags)) {
            Py_DECREF(out);
            Py_RETURN_NONE;
        }
        return (PyObject *)out;
    }
    #undef LZ_MAXDIM
    /* An integer scalar next to an integer array of type ``t``, as NumPy 2 takes it: a
       Python int that fits the type (NumPy raises for one that does not: 0 here, and the
       caller makes NumPy's call), or a NumPy scalar of that very type; stored in ``buf``. */
    static int lz_int_scalar(PyObject *s, int t, void *buf) {
        if (PyLong_CheckExact(s)) {
            int ovf = 0;
            long long v = PyLong_AsLongLongAndOverflow(s, &ovf);
            if (ovf || (v == -1 && PyErr_Occurred())) { PyErr_Clear(); return 0; }
            switch (t) {
            #define LZ_STORE(T, LO, HI) \
                if (v < (long long)(LO) || (HI) < (unsigned long long)v && v >= 0) return 0; \
                *(T *)buf = (T)v; return 1;
            case NPY_BYTE: LZ_STORE(npy_byte, NPY_MIN_BYTE, NPY_MAX_BYTE)
            case NPY_UBYTE: LZ_STORE(npy_ubyte, 0, NPY_MAX_UBYTE)
            case NPY_SHORT: LZ_STORE(npy_short, NPY_MIN_SHORT, NPY_MAX_SHORT)
            case NPY_USHORT: LZ_STORE(npy_ushort, 0, NPY_MAX_USHORT)
            case NPY_INT: LZ_STORE(npy_int, NPY_MIN_INT, NPY_MAX_INT)
            case NPY_UINT: LZ_STORE(npy_uint, 0, NPY_MAX_UINT)
            case NPY_LONG: LZ_STORE(npy_long, NPY_MIN_LONG, NPY_MAX_LONG)
            case NPY_ULONG: LZ_STORE(npy_ulong, 0, NPY_MAX_ULONG)
            case NPY_LONGLONG: LZ_STORE(npy_longlong, NPY_MIN_LONGLONG, NPY_MAX_LONGLONG)
            case NPY_ULONGLONG: LZ_STORE(npy_ulonglong, 0, NPY_MAX_ULONGLONG)
            #undef LZ_STORE
            default: return 0;
            }
        }
        if (PyArray_IsScalar(s, Integer)) {
            PyArray_Descr *d = PyArray_DescrFromScalar(s);
            if (d == NULL) { PyErr_Clear(); return 0; }
            int same = d->type_num == t;
            Py_DECREF(d);
            if (!same) return 0;
            PyArray_ScalarAsCtype(s, buf);
            return 1;
        }
        return 0;
    }
    /* ``v.max()`` / ``v.min()`` of a non-empty 1-D or 2-D integer array (any strides): the
       extreme element as NumPy's scalar of the array's dtype (exact: the same value NumPy's
       reduction finds, whatever the order).  None for anything else. */
    #define LZ_EXTREME(T) { \
        T best = *(T *)PyArray_BYTES(x); \
        for (npy_intp r = 0; r < rows; r++) { \
            char *p = PyArray_BYTES(x) + r * s0; \
            for (npy_intp c = 0; c < cols; c++, p += s1) { \
                T v = *(T *)p; \
                if (want_max ? v > best : v < best) best = v; \
            } \
        } \
        return PyArray_Scalar(&best, PyArray_DESCR(x), NULL); }
    static PyObject *lz_int_extreme(PyObject *a, int want_max) {
        if (!PyArray_CheckExact(a)) Py_RETURN_NONE;
        PyArrayObject *x = (PyArrayObject *)a;
        int nd = PyArray_NDIM(x);
        if ((nd != 1 && nd != 2) || PyArray_SIZE(x) == 0 || !PyArray_ISALIGNED(x) ||
                !PyArray_ISNOTSWAPPED(x)) Py_RETURN_NONE;
        npy_intp rows = nd == 2 ? PyArray_DIM(x, 0) : 1, cols = PyArray_DIM(x, nd - 1);
        npy_intp s0 = nd == 2 ? PyArray_STRIDE(x, 0) : 0, s1 = PyArray_STRIDE(x, nd - 1);
        switch (PyArray_TYPE(x)) {
        case NPY_BYTE: LZ_EXTREME(npy_byte)
        case NPY_UBYTE: LZ_EXTREME(npy_ubyte)
        case NPY_SHORT: LZ_EXTREME(npy_short)
        case NPY_USHORT: LZ_EXTREME(npy_ushort)
        case NPY_INT: LZ_EXTREME(npy_int)
        case NPY_UINT: LZ_EXTREME(npy_uint)
        case NPY_LONG: LZ_EXTREME(npy_long)
        case NPY_ULONG: LZ_EXTREME(npy_ulong)
        case NPY_LONGLONG: LZ_EXTREME(npy_longlong)
        case NPY_ULONGLONG: LZ_EXTREME(npy_ulonglong)
        default: Py_RETURN_NONE;
        }
    }
    #undef LZ_EXTREME
    /* ``add.reduce(v, axis=-1)`` of a C-ordered float64/float32 array whose last axis has 2
       to 7 elements (``v.sum()`` of such a 1-D array): NumPy runs its add loop once per
       output element there (~20 ns each: 46 us for a (600, 4, 2) array).  Below 8 elements
       NumPy's pairwise sum adds in order from the identity: ``((0 + a0) + a1) + ...``, one
       correctly rounded addition each (``tests/test_short_sum.py`` compares bit for bit);
       the same additions here, in the array's type.  A floating-point flag raised: None, and
       the caller makes NumPy's call (its warnings).  None too for anything else. */
    #define LZ_SHORT_SUM(T) { \
        const char *p = PyArray_BYTES(x); \
        T *o = (T *)PyArray_DATA(out); \
        for (npy_intp i = 0; i < m; i++, p += n * sizeof(T)) { \
            T acc = (T)0; \
            for (npy_intp k = 0; k < n; k++) acc += ((const T *)p)[k]; \
            o[i] = acc; \
        } }
    static PyObject *lz_short_sum(PyObject *a) {
        if (!PyArray_CheckExact(a)) Py_RETURN_NONE;
        PyArrayObject *x = (PyArrayObject *)a;
        int nd = PyArray_NDIM(x), t = PyArray_TYPE(x);
        if (nd < 1 || (t != NPY_DOUBLE && t != NPY_FLOAT) || !PyArray_IS_C_CONTIGUOUS(x) ||
                !PyArray_ISALIGNED(x) || !PyArray_ISNOTSWAPPED(x)) Py_RETURN_NONE;
        npy_intp n = PyArray_DIM(x, nd - 1);
        if (n < 2 || n > 7) Py_RETURN_NONE;
        npy_intp m = PyArray_SIZE(x) / n;
        PyArrayObject *out = (PyArrayObject *)PyArray_SimpleNew(nd - 1, PyArray_DIMS(x), t);
        if (out == NULL) return NULL;
        const int flags = FE_DIVBYZERO | FE_OVERFLOW | FE_UNDERFLOW | FE_INVALID;
        feclearexcept(flags);
        if (t == NPY_DOUBLE) LZ_SHORT_SUM(npy_double) else LZ_SHORT_SUM(npy_float)
        if (fetestexcept(flags)) {
            Py_DECREF(out);
            Py_RETURN_NONE;
        }
        if (nd == 1) {
            PyObject *r = PyArray_Scalar(PyArray_DATA(out), PyArray_DESCR(out), NULL);
            Py_DECREF(out);
            return r;
        }
        return (PyObject *)out;
    }
    #undef LZ_SHORT_SUM
    /* ``target[mask] = value`` for a boolean mask of the target's shape and a scalar value
       NumPy converts exactly to the target's type (a float into float64, a float32 of the
       type or a float it holds exactly into float32, an int in range into an integer type,
       a bool into bool): every element under a nonzero mask byte gets the value's bytes, the
       others keep theirs.  NumPy's masked assignment walks the mask element by element
       (4.7 ns each on a random mask: 2.9 ms for 620k int8 elements); this loop selects
       without branches, so it vectorizes.  1 when done, 0 (nothing written) otherwise. */
    #define LZ_FILL(T) { \
        T val = *(T *)sbuf; \
        for (npy_intp r = 0; r < rows; r++) { \
            char *pt = PyArray_BYTES(t) + r * st0; \
            const char *pm = PyArray_BYTES(m) + r * sm0; \
            if (st1 == (npy_intp)sizeof(T) && sm1 == 1) { \
                T *tt = (T *)pt; \
                const npy_bool *mm = (const npy_bool *)pm; \
                for (npy_intp c = 0; c < cols; c++) { \
                    T keep = (T)((T)(mm[c] != 0) - (T)1);  /* all ones where mask is 0 */ \
                    tt[c] = (tt[c] & keep) | (val & (T)~keep); \
                } \
            } else { \
                for (npy_intp c = 0; c < cols; c++) { \
                    T *tt = (T *)(pt + c * st1); \
                    *tt = *(const npy_bool *)(pm + c * sm1) ? val : *tt; \
                } \
            } \
        } \
        return 1; }
    static int lz_mask_fill(PyObject *target, PyObject *mask, PyObject *value, int dry) {
        if (!PyArray_CheckExact(target) || !PyArray_CheckExact(mask)) return 0;
        PyArrayObject *t = (PyArrayObject *)target, *m = (PyArrayObject *)mask;
        int nd = PyArray_NDIM(t), tn = PyArray_TYPE(t);
        if ((nd != 1 && nd != 2) || PyArray_NDIM(m) != nd || PyArray_TYPE(m) != NPY_BOOL ||
                !PyArray_ISWRITEABLE(t) || !PyArray_ISALIGNED(t) || !PyArray_ISNOTSWAPPED(t) ||
                !lz_rowmajor(t) || !lz_rowmajor(m))
            return 0;
        for (int i = 0; i < nd; i++)
            if (PyArray_DIM(t, i) != PyArray_DIM(m, i)) return 0;
        npy_longlong sbuf[2];
        if (tn == NPY_DOUBLE) {
            if (PyFloat_Check(value) && (PyFloat_CheckExact(value) ||
                                         PyArray_IsScalar(value, Double)))
                *(double *)sbuf = PyFloat_AS_DOUBLE(value);
            else return 0;
        } else if (tn == NPY_FLOAT) {
            if (Py_IS_TYPE(value, &PyFloatArrType_Type)) {
                *(float *)sbuf = PyArrayScalar_VAL(value, Float);
            } else if (PyFloat_CheckExact(value)) {
                double d = PyFloat_AS_DOUBLE(value);
                if ((double)(float)d != d) return 0;      /* (NaN too: NumPy's cast) */
                *(float *)sbuf = (float)d;
            } else return 0;
        } else if (tn == NPY_BOOL) {
            if (value == Py_True || value == Py_False)
                *(npy_bool *)sbuf = value == Py_True;
            else if (PyArray_IsScalar(value, Bool))
                *(npy_bool *)sbuf = PyArrayScalar_VAL(value, Bool);
            else return 0;
        } else if (PyTypeNum_ISINTEGER(tn)) {
            if (!lz_int_scalar(value, tn, (void *)sbuf)) return 0;
        } else {
            return 0;
        }
        if (dry) return PyArray_ITEMSIZE(t) <= 8;       /* (it applies: nothing written) */
        npy_intp rows = nd == 2 ? PyArray_DIM(t, 0) : 1, cols = PyArray_DIM(t, nd - 1);
        npy_intp st0 = nd == 2 ? PyArray_STRIDE(t, 0) : 0, st1 = PyArray_STRIDE(t, nd - 1);
        npy_intp sm0 = nd == 2 ? PyArray_STRIDE(m, 0) : 0, sm1 = PyArray_STRIDE(m, nd - 1);
        switch (PyArray_ITEMSIZE(t)) {
        case 1: LZ_FILL(npy_uint8)
        case 2: LZ_FILL(npy_uint16)
        case 4: LZ_FILL(npy_uint32)
        case 8: LZ_FILL(npy_uint64)
        default: return 0;
        }
    }
    #undef LZ_FILL
    /* Copy ``src`` (a new C-ordered array) into ``dst`` of the same shape and type, a
       writeable row-major 1-D or 2-D array: row by row.  0 (nothing copied) otherwise. */
    static int lz_copy_into(PyObject *dst_obj, PyObject *src_obj) {
        if (!PyArray_CheckExact(dst_obj) || !PyArray_CheckExact(src_obj)) return 0;
        PyArrayObject *d = (PyArrayObject *)dst_obj, *r = (PyArrayObject *)src_obj;
        int nd = PyArray_NDIM(d);
        if ((nd != 1 && nd != 2) || PyArray_NDIM(r) != nd || PyArray_TYPE(r) != PyArray_TYPE(d) ||
                !PyArray_ISWRITEABLE(d) || !PyArray_ISALIGNED(d) || !PyArray_IS_C_CONTIGUOUS(r) ||
                !lz_rowmajor(d))
            return 0;
        for (int i = 0; i < nd; i++)
            if (PyArray_DIM(d, i) != PyArray_DIM(r, i)) return 0;
        npy_intp item = PyArray_ITEMSIZE(d);
        npy_intp rows = nd == 2 ? PyArray_DIM(d, 0) : 1, cols = PyArray_DIM(d, nd - 1);
        npy_intp s0 = nd == 2 ? PyArray_STRIDE(d, 0) : 0, s1 = PyArray_STRIDE(d, nd - 1);
        const char *src = PyArray_BYTES(r);
        for (npy_intp i = 0; i < rows; i++) {
            char *row = PyArray_BYTES(d) + i * s0;
            if (s1 == item) {
                memcpy(row, src, cols * item);
                src += cols * item;
            } else {
                for (npy_intp c = 0; c < cols; c++, src += item) memcpy(row + c * s1, src, item);
            }
        }
        return 1;
    }
    static PyObject *lz_loop2(PyObject *uf_obj, PyObject *a, PyObject *b) {
        PyUFuncObject *uf = (PyUFuncObject *)uf_obj;
        PyArrayObject *x = NULL, *y = NULL;   /* the array operands */
        double sd; float sf;                   /* a scalar operand's value */
        npy_longlong sbuf[2];
        void *sp = NULL;
        int t;
        if (PyArray_CheckExact(a)) x = (PyArrayObject *)a;
        if (PyArray_CheckExact(b)) y = (PyArrayObject *)b;
        PyArrayObject *arr = x != NULL ? x : y;
        if (arr == NULL) Py_RETURN_NONE;
        t = PyArray_TYPE(arr);
        int integer = PyTypeNum_ISINTEGER(t);
        if (t != NPY_DOUBLE && t != NPY_FLOAT && !integer) Py_RETURN_NONE;
        if (x == NULL || y == NULL) {
            PyObject *s = x == NULL ? a : b;
            if (t == NPY_DOUBLE && (PyFloat_CheckExact(s) || PyArray_IsScalar(s, Double))) {
                sd = PyFloat_AS_DOUBLE(s);      /* (numpy.float64 is a float subclass) */
                sp = &sd;
            } else if (t == NPY_FLOAT && Py_IS_TYPE(s, &PyFloatArrType_Type)) {
                sf = PyArrayScalar_VAL(s, Float);
                sp = &sf;
            } else if (!integer && (PyLong_CheckExact(s) || (t == NPY_FLOAT &&
                                                             PyFloat_CheckExact(s)))) {
                /* a Python int (or a float into float32) the array's type holds exactly:
                   NumPy converts it to that type (NEP 50), exactly */
                double d;
                if (PyLong_CheckExact(s)) {
                    int ovf = 0;
                    long long v = PyLong_AsLongLongAndOverflow(s, &ovf);
                    if (ovf || (v == -1 && PyErr_Occurred())) { PyErr_Clear(); Py_RETURN_NONE; }
                    if (v > (1LL << 53) || v < -(1LL << 53)) Py_RETURN_NONE;
                    d = (double)v;
                } else {
                    d = PyFloat_AS_DOUBLE(s);
                }
                if (t == NPY_DOUBLE) {
                    sd = d;
                    sp = &sd;
                } else {
                    if ((double)(float)d != d) Py_RETURN_NONE;
                    sf = (float)d;
                    sp = &sf;
                }
            } else if (integer && lz_int_scalar(s, t, (void *)sbuf)) {
                sp = (void *)sbuf;
            } else {
                Py_RETURN_NONE;
            }
            if (!lz_loop_operand((PyObject *)arr, t)) Py_RETURN_NONE;
        } else {
            if (PyArray_TYPE(y) != t) Py_RETURN_NONE;
            int same = lz_loop_operand(a, t) && lz_loop_operand(b, t) &&
                PyArray_NDIM(x) == PyArray_NDIM(y);
            for (int i = 0; same && i < PyArray_NDIM(x); i++)
                if (PyArray_DIM(x, i) != PyArray_DIM(y, i)) same = 0;
            if (!same) return lz_run_broadcast(uf, x, y, t);
        }
        PyArrayObject *ops[2] = {x, y};
        return lz_run_rows(uf, 2, ops, sp, arr, t);
    }
    static PyObject *lz_loop1(PyObject *uf_obj, PyObject *a) {
        PyUFuncObject *uf = (PyUFuncObject *)uf_obj;
        if (!PyArray_CheckExact(a)) Py_RETURN_NONE;
        PyArrayObject *x = (PyArrayObject *)a;
        int t = PyArray_TYPE(x);
        if ((t != NPY_DOUBLE && t != NPY_FLOAT) || !lz_loop_operand(a, t)) Py_RETURN_NONE;
        PyArrayObject *ops[1] = {x};
        return lz_run_rows(uf, 1, ops, NULL, x, t);
    }
    """
    object lz_loop2(object uf, object a, object b)
    object lz_loop1(object uf, object a)
    object lz_int_extreme(object a, int want_max)
    object lz_short_sum(object a)
    int lz_mask_fill(object target, object mask, object value, int dry) except -1
    int lz_copy_into(object dst, object src)


import numpy as _numpy
_array_function_dispatcher = type(_numpy.dot)
_exact_np_scalars = frozenset(_numpy.sctypeDict.values())
#: add, subtract, multiply, true_divide by dunder kind (K_ADD...K_TRUEDIV), the comparisons
#: by rich-comparison code, negative and absolute by unary kind: lz_loop2/lz_loop1's ufuncs
cdef list _arith_ufuncs = [_numpy.add, _numpy.subtract, _numpy.multiply, _numpy.true_divide]
cdef list _cmp_ufuncs = [_numpy.less, _numpy.less_equal, _numpy.equal, _numpy.not_equal,
                         _numpy.greater, _numpy.greater_equal]
cdef list _unary_ufuncs = [_numpy.negative, None, _numpy.absolute, None]
#: The ufuncs whose ``uf(a, b, out=a)`` NumPy's in-place operator is (``a += b`` calls
#: ``np.add(a, b, out=a)``), by dunder kind.  (``**=`` is left out: NumPy's operator takes
#: fast paths of its own for some exponents.)
cdef dict _INPLACE_KINDS = {
    _numpy.add: K_ADD, _numpy.subtract: K_SUB, _numpy.multiply: K_MUL,
    _numpy.true_divide: K_TRUEDIV, _numpy.floor_divide: K_FLOORDIV,
    _numpy.remainder: K_MOD, _numpy.bitwise_and: K_AND, _numpy.bitwise_or: K_OR,
    _numpy.bitwise_xor: K_XOR, _numpy.left_shift: K_LSHIFT, _numpy.right_shift: K_RSHIFT}
#: The ufuncs lz_loop2/lz_loop1 may run (each element one correctly rounded or exact op).
EXACT_LOOP_UFUNCS = frozenset(_arith_ufuncs + _cmp_ufuncs + [
    _numpy.maximum, _numpy.minimum, _numpy.negative, _numpy.absolute, _numpy.sqrt])

cdef Py_ssize_t _ELIDE_MIN = 32768   # elements: NumPy elides temporaries from 256 KiB
import opcode as _opcode
lz_set_binop_opcode(_opcode.opmap.get("BINARY_OP", -1))
import dis as _dis
lz_set_operator_opcodes(_opcode.opmap.get("COMPARE_OP", -1),
                        [name for name, _ in getattr(_dis, "_nb_ops", ())].index("NB_INPLACE_ADD")
                        if hasattr(_dis, "_nb_ops") else 0)


cdef class OperatorDeferral:
    """``__array_ufunc__`` as NumPy reads it on ``lazynp.ndarray`` (a data descriptor on its
    metaclass): None while a Python operator (``a * b``, ``a < b``, not ``a *= b``) is
    being evaluated, else the array's ``__array_ufunc__`` method.

    ``numpy_scalar * lazy_array`` first calls the NumPy scalar's operator, which gives way
    to the right operand only when its class says ``__array_ufunc__ = None``; otherwise it
    runs NumPy's ufunc machinery, whose override dispatch to ``lazy_array.__array_ufunc__``
    costs ~0.55 us, as much as the operation on a small array.  Seen as None during an
    operator, NumPy returns NotImplemented and Python calls the array's reflected operator
    (lazynp's C path).  Everywhere else (``numpy.exp(lazy)``, ``numpy_array += lazy``,
    ufunc methods) NumPy finds the method and calls it as before.
    """

    cdef object method

    def __init__(self, method):
        self.method = method

    def __get__(self, obj, objtype):
        if obj is not None and lz_at_operator():
            return None
        return self.method

    def __set__(self, obj, value):
        raise AttributeError("lazynp.ndarray.__array_ufunc__ is read-only")


cdef inline bint _same_shape(cnp.ndarray a, cnp.ndarray b):
    # (a typed ndarray's .shape is its C dims pointer in Cython: compare the dimensions)
    cdef int i, nd = cnp.PyArray_NDIM(a)
    if nd != cnp.PyArray_NDIM(b):
        return False
    for i in range(nd):
        if cnp.PyArray_DIMS(a)[i] != cnp.PyArray_DIMS(b)[i]:
            return False
    return True


cdef inline Py_ssize_t _refs_of_value(ndarray t):
    """References to a detached array's NumPy value (a borrowed read: no reference taken)."""
    return (<PyObject*>t._val).ob_refcnt


cdef object _elide(int k, x, y, vx, vy):
    """NumPy's temporary elision for ``x (op) y`` run at once: when one operand is a
    temporary lazynp array (only the interpreter's stack refers to it, its buffer only to
    it) of the result's dtype and shape, the result is written into that buffer and the
    temporary returned (no new allocation: for large arrays a fresh one costs page faults).
    add, sub, mul, truediv on inexact dtypes, add, sub, mul on integers (NumPy elides
    those too: clipping's ``np.clip(a, 2, 10) * np.int64(4) + ...``); None when it does
    not apply."""
    cdef ndarray t
    cdef object other, tv
    cdef bint left
    if type(x) is ndarray and (<ndarray>x)._v is None and lz_refcnt(x) == 1:
        t, left = <ndarray>x, True
    elif type(y) is ndarray and (<ndarray>y)._v is None and lz_refcnt(y) == 1 and \
            (k == K_ADD or k == K_MUL):
        t, left = <ndarray>y, False
    else:
        return None
    # the buffer: held by ``t`` and by _binop's own reference to it (vx or vy), nothing else
    # (counted before this function takes references of its own)
    if t._ext or t._isview or t._val is None or _refs_of_value(t) != 2:
        return None
    tv = t._val
    other = vy if left else vx
    if cnp.PyArray_SIZE(<cnp.ndarray>tv) < _ELIDE_MIN or \
            not cnp.PyArray_ISWRITEABLE(<cnp.ndarray>tv) or not lz_in_binary_op():
        return None
    dk = (<cnp.ndarray>tv).dtype.kind
    if dk == "i" or dk == "u":
        # integers: add, sub and mul keep the dtype with a Python int (NumPy's weak
        # promotion; a value that does not fit raises NumPy's error before any write) or
        # an operand of the same dtype; a true division makes floats
        if k == K_TRUEDIV:
            return None
    elif dk != "f" and dk != "c":
        return None
    to = type(other)
    if to is int or to is bool:
        pass
    elif to is float:
        if dk != "f" and dk != "c":
            return None
    elif to is complex:
        if dk != "c":
            return None
    elif to is _ndarray_np:
        if (<cnp.ndarray>other).dtype is not (<cnp.ndarray>tv).dtype and \
                (<cnp.ndarray>other).dtype != (<cnp.ndarray>tv).dtype:
            return None
        if not _same_shape(<cnp.ndarray>other, <cnp.ndarray>tv):
            return None
    elif to in _exact_np_scalars:
        # a NumPy scalar of the temporary's own dtype (clipping's ``np.int64(4)``)
        if other.dtype != (<cnp.ndarray>tv).dtype:
            return None
    else:
        return None
    global _n_eager, _n_elided
    _n_elided += 1
    if k == K_ADD:
        PyNumber_InPlaceAdd(tv, other)
    elif k == K_MUL:
        PyNumber_InPlaceMultiply(tv, other)
    elif k == K_SUB:
        PyNumber_InPlaceSubtract(tv, other)
    else:
        PyNumber_InPlaceTrueDivide(tv, other)
    _n_eager += 1
    return t


cdef object _inplace_now(int k, ndarray self, y):
    """``self (op)= y`` as NumPy's in-place operation on the buffer, when it may be written
    at once (then ``self``), else ``_NE``."""
    cdef object vy, target
    if not _record_all:
        vy = _eager_arg(y, k != K_MATMUL)
        if vy is not _NE and k != K_MATMUL and type(vy) is _ndarray_np and \
                cnp.PyArray_SIZE(<cnp.ndarray>vy) >= _eager_max and _permuted(vy):
            vy = _NE      # (a large operand in a permuted layout: the target keeps its own)
        if vy is not _NE:
            target = _writable(self, _nelems(self))
            if target is not None:
                _inplace_op(k, target, vy)
                return self
    return _NE


cdef object _inplace(int k, ndarray self, y):
    """``self (op)= y``: NumPy's in-place operation on the buffer when it may be written at
    once, else the recorded path."""
    if _inplace_now(k, self, y) is not _NE:
        return self
    if _never_defers_to(y):
        return _inpl_plain[k](self, y)
    return _inpl[k](self, y)


cdef object _unop(int k, ndarray self):
    cdef object v
    if not _record_all and not _to_tree(self, None, True):
        v = _eager_arg(self, not _shared(self))
        if v is not _NE:
            if _unary_ufuncs[k] is not None:
                r = lz_loop1(_unary_ufuncs[k], v)
                if r is not None:
                    return _wrap(r)
            if k == 0:
                return _wrap(PyNumber_Negative(v))
            if k == 1:
                return _wrap(PyNumber_Positive(v))
            if k == 2:
                return _wrap(PyNumber_Absolute(v))
            return _wrap(PyNumber_Invert(v))
    return _unary_py[k](self)


cdef Py_ssize_t _tree(Node n, op, args, shape, bint count_uses) except -1:
    """Set ``n``'s tree-kernel structure; with ``count_uses`` count its arguments' uses; the
    tree's size, 0 when none (trees.tree_structure)."""
    cdef list key = [op]
    cdef tuple ins = (), kf = (), ki = ()
    cdef Py_ssize_t size = 1, gen = state.generation, k
    cdef bint ok = True, shared = False
    cdef Node an
    if len(args) == 2 and op.name == "power":
        # a scalar exponent 2 is NumPy's square (x * x); other powers (libm's pow) are left
        # to NumPy
        if type(args[1]) is Node or not _squares(args[1], n.dtype):
            if count_uses:
                for a in args:
                    if type(a) is Node:
                        (<Node>a).use_count += 1
            return 0
        key.append("sq")
        args = args[:1]
    for a in args:
        t = type(a)
        if t is Node:
            an = <Node>a
            if count_uses:
                an.use_count += 1
            if not ok:
                continue
            if an.shape != shape and not (_broadcasts(an.shape, shape) and _computed(an)):
                ok = False      # (only a computed input may broadcast)
            elif an.state == PENDING and not _computed(an):
                if not an.has_tree:
                    ok = False
                    continue
                if ins:
                    ins, remap = _merge_inputs_c(ins, an.tree_inputs)
                    key.append(("t", an.tree_id, remap))
                else:
                    key.append(an.tree_id)
                    ins = an.tree_inputs
                if an.use_count > 1:
                    shared = True       # (read elsewhere too: maybe twice in this tree)
                kf += an.tree_floats
                ki += an.tree_ints
                size += an.tree_size
                if an.tree_generation < gen:
                    gen = an.tree_generation
            elif a in ins:
                key.append(~ins.index(a))
            else:
                key.append(an.dtype)
                ins += (a,)
        elif t is float:
            key.append(float)
            kf += (a,)
        elif t is _np_float64:
            key.append(_np_float64)     # (a NumPy scalar: a float64 operand, not a weak one)
            kf += (a,)
        elif t is int and 0 <= a <= 127:
            key.append(int)
            ki += (a,)
        else:
            ok = False
    if not ok or not ins:
        return 0
    if size <= _max_tree:
        if shared:
            key.append("dup")
        tkey = tuple(key)
        sid = _tree_ids.get(tkey, -1)
        if sid == -1:
            sid = _tree_structure(tkey, n)
        if sid is not None:
            n.has_tree = True
            n.tree_id = sid
            n.tree_inputs = ins
            n.tree_floats = kf
            n.tree_ints = ki
            n.tree_size = size
            n.tree_generation = gen
    return size


cdef inline bint _computed(Node n):
    """``n`` (a view: its base) holds its value (nodes.computed): a tree kernel input."""
    if n.op is _VIEW:
        n = <Node>n.args[0]
    return n.state == DONE and n.value is not None and n.error is None


cdef bint _squares(e, dtype):
    """``x ** e`` is NumPy's square (kernels/tree.py renders it ``x * x``)."""
    t = type(e)
    return (t is float or t is int or t is _np_float64) and e == 2 and dtype.kind == "f"


cdef bint _broadcasts(tuple s, tuple shape):
    """An input of shape ``s`` broadcasts to ``shape``."""
    cdef Py_ssize_t k = len(s), nd = len(shape), i
    if k > nd:
        return False
    for i in range(1, k + 1):
        if s[k - i] != 1 and s[k - i] != shape[nd - i]:
            return False
    return True


cdef dict _tree_ops = {}     # op -> an elementwise ufunc op (kernels/tree.py structures)


cdef inline bint _is_tree_op(op):
    known = _tree_ops.get(op)
    if known is None:
        known = _tree_ops[op] = op.ufunc is not None and op.kind == "elementwise"
    return known is True


cdef inline bint _is_mid_tree_op(op):
    """A tree op that medium work records (lazynp.core.policy.tree_op), cached per op."""
    known = _mid_tree_ops.get(op)
    if known is None:
        known = _mid_tree_ops[op] = bool(_tree_op_fn(op))
    return known is True


cdef object _tape = None         # autograd's tape (a list) while a trace is open
cdef bint _tape_paused = False


def set_tape(tape, bint paused):
    """Put every recorded node on ``tape`` (a list; None: no trace is open), unless
    ``paused``; an in-place write marks the array it writes as read by a backward pass
    (``recorder.install_tape``; ``recorder._taped`` in C)."""
    global _tape, _tape_paused
    _tape = tape
    _tape_paused = paused


cpdef Node record(op, args, params, shape, dtype):
    """Add a node to the pending graph (no work runs) and return it; or run it at once and
    return a computed node when the execution policy says so (recorder.record).  While a
    trace is open the node goes on its tape (:func:`set_tape`)."""
    cdef Node n = _record(op, args, params, shape, dtype)
    if _tape is not None:
        if not _tape_paused:
            _tape.append(n)
        if op.kind == "write" and args and type(args[0]) is Node:
            # the old version may be read by the backward pass: never overwrite it in place
            a = <Node>args[0]
            if a.op is _VIEW:
                a = <Node>a.args[0]
            a.exported = True
    return n


cdef Node _record(op, args, params, shape, dtype):
    cdef int d = D_RECORD
    if not _record_all and op.kind != "write":
        d = _run_now(op, args, shape)
        if d == D_NOW:
            return _run_eager_fn(op, args, params, shape, dtype)
    cdef Node n = Node.__new__(Node)
    _init_node(n, op, args, params, shape, dtype)
    code = lz_user_code(_pkg, &n.site_lasti)
    if code is not None:
        n.site_code = code
    ext = get_value(_extobj_var)
    if ext is _default_ext and params is None and _is_tree_op(op) and _tape is None:
        # (not while a trace keeps the graph: tree kernels do not run then)
        if _tree(n, op, args, shape, True) > _max_tree and not _keep_graph:
            # a chain grown past a tree kernel's size: compute its pending arguments now
            # (each one tree kernel), and start a new tree on their values
            for a in args:
                if type(a) is Node and (<Node>a).state == PENDING and (<Node>a).has_tree:
                    _flush_fn([a])
            _tree(n, op, args, shape, False)
            if code is not None:
                _restart_site_fn((code, n.site_lasti))
    else:
        if ext is not _default_ext:
            n.errstate = ext     # the user's np.errstate at the recording line applies when it runs
        for a in args:
            if type(a) is Node:
                (<Node>a).use_count += 1
    if d == D_TREE and (not n.has_tree or
                        _lone_sites and _size_of(shape) <
                        _lone_sites.get(_site_key(n.site_code, n.site_lasti), 0) or
                        _fragment_sites and n.tree_size == 1 and _size_of(shape) <
                        _fragment_sites.get(_site_key(n.site_code, n.site_lasti), 0)):
        done = _run_untreed_fn(n)      # (joins no tree kernel: at once)
        if done is not None:
            return <Node>done
    state.pending_count += 1
    state.n_recorded += 1
    if state.pending_count >= state.max_pending:
        _bound_flush()
    cdef int raises = _raises_on_values(op)
    if raises:
        ws = _current_wstate()
        if _run_at_call(raises, code, n.site_lasti, ext):
            _run_at_call_fn(n)
        else:
            n.warnings_state = ws
    return n


cdef object _py_recorder = None     # set_recorder


def set_recorder(recorder):
    """Record the C dunders' and one-input ufunc calls' nodes with ``recorder`` (a Python
    recorder such as ``recorder.py_record``; None: this module's :func:`record`), so that
    tests run the two recorders on the same programs."""
    global _py_recorder
    _py_recorder = recorder


cdef inline object _record_call(op, tuple args, shape, dt):
    """``record(op, args, None, shape, dt)``, or the recorder given to :func:`set_recorder`."""
    if _py_recorder is None:
        return record(op, args, None, shape, dt)
    return _py_recorder(op, args, None, shape, dt)


cdef class UfuncInfo:
    """What the C call path of a lazy ufunc needs (``ufunc._c``): for one input, the op and
    its dtype cache; for two, its dunders (``binary(a, b)`` and ``binary_r(b, a)``)."""

    cdef object op, np_uf, dtypes, result_dtypes, binary, binary_r
    cdef bint exact_loop, mid_tree
    cdef int inplace_kind       # the in-place operator NumPy's ``uf(a, b, out=a)`` is, or -1

    def __init__(self, op, np_uf, dtypes, result_dtypes, binary=None, binary_r=None):
        self.op = op
        self.np_uf = np_uf
        self.inplace_kind = _INPLACE_KINDS.get(np_uf, -1)
        self.exact_loop = np_uf in EXACT_LOOP_UFUNCS
        self.mid_tree = _is_mid_tree_op(op)
        self.dtypes = dtypes
        self.result_dtypes = result_dtypes
        self.binary = binary
        self.binary_r = binary_r


cdef inline bint _py_scalar(t):
    return t is float or t is int or t is bool or t is complex


cdef inline bint _numpy_scalars(tuple args):
    """One or two operands, a NumPy float64 among them and the other a Python scalar or
    NumPy float64."""
    cdef Py_ssize_t n = len(args)
    if n == 1:
        return type(args[0]) is _np_float64
    if n != 2:
        return False
    ta = type(args[0])
    tb = type(args[1])
    if ta is _np_float64:
        return tb is _np_float64 or _py_scalar(tb)
    return tb is _np_float64 and _py_scalar(ta)


cdef class UfuncBase:
    """The base of ``lazynp.ufunc`` with the C call path: ``np.exp(a)``, ``np.add(a, b)``,
    ``np.maximum(a, 0)`` on lazy arrays and Python scalars in C (a type slot, no method
    lookup); everything else by the Python method ``_call_py``."""

    cdef public object _c       # UfuncInfo, or None: always the Python path

    def __call__(self, *args, **kwargs):
        global _n_eager
        info = self._c
        if info is None:
            return self._call_py(*args, **kwargs)
        if not kwargs and not _record_all and _numpy_scalars(args):
            # ``np.tanh(a[i, i])`` in a Python loop: NumPy's own call on its scalars (what
            # _ufunc_call ends in, without its questions about arrays)
            _n_eager += 1
            return (<UfuncInfo>info).np_uf(*args)
        if kwargs or len(args) == 3:
            r = _ufunc_into_first(<UfuncInfo>info, args, kwargs)
            if r is not _NE:
                return r
            return self._call_py(*args, **kwargs)
        return _ufunc_call(<UfuncInfo>info, self, args)


cdef object _ufunc_into_first(UfuncInfo u, tuple args, dict kwargs):
    """``np.add(a, b, a)`` / ``np.add(a, b, out=a)`` (``out`` the first operand, a lazy
    array; ``b`` a lazy or NumPy array or a Python scalar) is NumPy's ``a += b``, which NumPy
    defines as that very call: when the write may go at once, the in-place operator's path
    (about 0.5 us, against 6 us through the keyword parsing of ``_call``).  ``_NE`` for any
    other call or a write to record."""
    cdef object out, a
    if u.inplace_kind < 0:
        return _NE
    if kwargs:
        if len(args) != 2 or len(kwargs) != 1:
            return _NE
        out = kwargs.get("out", _NE)
        if type(out) is tuple and len(<tuple>out) == 1:
            out = (<tuple>out)[0]
    else:
        out = args[2]
    a = args[0]
    if out is not a or type(a) is not _array_cls:
        return _NE
    tb = type(args[1])
    if not (tb is _array_cls or tb is _ndarray_np or _py_scalar(tb)):
        return _NE
    # (written at once, or _NE: the recorded write is ``_call``'s, which the recorded
    # ``a += b`` itself calls)
    return _inplace_now(u.inplace_kind, <ndarray>a, args[1])


cdef object _ufunc_call(UfuncInfo u, self, tuple args):
    cdef Py_ssize_t nargs = len(args)
    cdef object va, vb
    cdef bint sized
    if not _record_all and not (u.mid_tree and (
            nargs == 1 and _to_tree(args[0], None, True) or
            nargs == 2 and _to_tree(args[0], args[1], False))):
        # the execution policy: NumPy's ufunc at once on computed operands
        if nargs == 1:
            va = _eager_arg(args[0], not _shared(args[0]))
            if va is not _NE:
                if _split_fn is not None and _large(va):
                    r = _try_split(u.np_uf, (va,))
                    if r is not None:
                        return _wrap(r)
                if u.exact_loop:
                    r = lz_loop1(u.np_uf, va)
                    if r is not None:
                        return _wrap(r)
                return _wrap(u.np_uf(va))
        elif nargs == 2:
            sized = not (_shared(args[0]) or _shared(args[1]))
            va = _eager_arg(args[0], sized)
            if va is not _NE:
                vb = _eager_arg(args[1], sized)
                if vb is not _NE:
                    if _split_fn is not None and (_large(va) or _large(vb)):
                        r = _try_split(u.np_uf, (va, vb))
                        if r is not None:
                            return _wrap(r)
                    if u.exact_loop:
                        r = lz_loop2(u.np_uf, va, vb)
                        if r is not None:
                            return _wrap(r)
                    return _wrap(u.np_uf(va, vb))
    if nargs == 1 and u.binary is None and type(args[0]) is _array_cls:
        na = _node_of(args[0])
        key = ((<Node>na).dtype,)
        dt = u.dtypes.get(key)
        if dt is None:
            dt = u.result_dtypes(u.np_uf, key)[0]
            u.dtypes[key] = dt
        shape = (<Node>na).shape
        return _new_array(_record_call(u.op, (na,), shape, dt), shape == ())
    if nargs == 2 and u.binary is not None:
        a = args[0]
        b = args[1]
        if type(a) is _array_cls:
            if type(b) is _array_cls or _py_scalar(type(b)) or type(b) is _np_float64:
                return u.binary(a, b)
        elif type(b) is _array_cls and (_py_scalar(type(a)) or type(a) is _np_float64):
            return u.binary_r(b, a)
    return self._call_py(*args)


cdef object _INT_LO = -(1 << 63), _INT_HI = (1 << 63) - 1


cdef object _broadcast2(tuple sa, tuple sb):
    """NumPy's broadcast of two shapes, or None when they do not broadcast."""
    cdef Py_ssize_t na = len(sa), nb = len(sb), n = na if na > nb else nb, i
    cdef Py_ssize_t da, db
    cdef list out = [None] * n
    for i in range(n):
        da = <Py_ssize_t>sa[na - n + i] if na - n + i >= 0 else 1
        db = <Py_ssize_t>sb[nb - n + i] if nb - n + i >= 0 else 1
        if da == db or db == 1:
            out[i] = da
        elif da == 1:
            out[i] = db
        else:
            return None
    return tuple(out)


def binary_dunder(uf, bint reflected, bint sequence_aware, result_dtypes, check_python_int,
                  broadcast_shapes, power):
    """The ``ndarray`` dunder of lazy ufunc ``uf`` (``_ufunc.ufunc.dunder``, in C)."""
    np_uf = uf._np
    op = uf._op
    dtypes = uf._dtypes
    cdef bint is_power = np_uf is power

    def f(a, b):
        tb = type(b)
        if tb is float or tb is int or tb is bool or tb is complex:
            nb = b
            kb = tb
            sb = ()
        elif tb is _np_float64:
            # (a NumPy float64, ``radius.max() * i``: a constant of its dtype, not a weak
            # scalar; a medium op on it joins a tree kernel as a Python float's does)
            nb = b
            kb = _F64_DTYPE
            sb = ()
        elif tb is _array_cls:
            nb = _node_of(b)
            kb = (<Node>nb).dtype
            sb = (<Node>nb).shape
        else:
            if sequence_aware and (<ndarray>a)._scalar and \
                    (tb is list or tb is tuple or tb is str):
                return NotImplemented
            return uf(b, a) if reflected else uf(a, b)
        na = _node_of(a)
        ka = (<Node>na).dtype
        if tb is int and not 0 <= b <= 127 and \
                not ((ka.kind == "f" or ka.kind == "c") and _INT_LO <= b <= _INT_HI):
            # (an int the size of a C long next to a float array goes through a float
            # loop: nothing to check; anything else NumPy may refuse)
            check_python_int(np_uf, (b, a) if reflected else (a, b),
                             (int, ka) if reflected else (ka, int))
            if is_power and b < 0 and ka.kind in "iu" and not reflected and \
                    0 not in (<Node>na).shape:
                raise ValueError("Integers to negative integer powers are not allowed.")
        key = (kb, ka) if reflected else (ka, kb)
        dt = dtypes.get(key)
        if dt is None:
            dt = result_dtypes(np_uf, key)[0]   # NumPy checks dtypes before shapes
            dtypes[key] = dt
        sa = (<Node>na).shape
        if sa == sb or sb == ():
            shape = sa
        elif sa == ():
            shape = sb
        else:
            shape = _broadcast2(<tuple>sa, <tuple>sb)
            if shape is None:
                shape = broadcast_shapes(sa, sb)        # (NumPy's error)
        return _new_array(_record_call(op, (nb, na) if reflected else (na, nb), shape, dt),
                          shape == ())
    return f


def live_pending_heads():
    """Pending heads of live Vars (each once); drops dead or computed entries from
    ``pending_vars`` (nodes.live_pending_heads, in C)."""
    cdef list keep = []
    cdef list heads = []
    cdef Node h
    for r in pending_vars:
        v = r()
        if v is not None:
            h = (<Var>v).head
            if h.state == PENDING:
                keep.append(r)
                heads.append(h)
    pending_vars[:] = keep
    return heads


# --- array addresses ----------------------------------------------------------------------------

from cpython.buffer cimport PyObject_GetBuffer, PyBuffer_Release, PyBUF_STRIDES


cdef Py_ssize_t _data_address(object a) except? -1:
    cdef Py_buffer view
    PyObject_GetBuffer(a, &view, PyBUF_STRIDES)
    cdef Py_ssize_t address = <Py_ssize_t>view.buf
    PyBuffer_Release(&view)
    return address


def data_offset(a, base):
    """Byte offset of NumPy array ``a``'s data pointer from ``base``'s, read through the
    buffer protocol (~0.1 us; ``__array_interface__`` builds a dict, ~2 us).  Dtypes NumPy
    does not export as a buffer (datetime64...) are read through ``__array_interface__``."""
    try:
        return _data_address(a) - _data_address(base)
    except (BufferError, ValueError, TypeError, NotImplementedError):
        return a.__array_interface__["data"][0] - base.__array_interface__["data"][0]


# --- running a plain node (executor._run + executor._after_run) ---------------------------------

cdef object _normalize = None, _node_failed = None


def configure_executor(*, view, book_lock, pool_min_bytes, value_of, normalize, node_failed,
                       ndarray):
    """Hand the executor core/executor.py's objects (called once, when it is imported)."""
    global _VIEW, _book_lock, _pool_min_bytes, _value_of, _normalize, _node_failed, _ndarray_np
    _VIEW = view
    _book_lock = book_lock
    _pool_min_bytes = pool_min_bytes
    _value_of = value_of
    _normalize = normalize
    _node_failed = node_failed
    _ndarray_np = ndarray


def run_node(Node n, epoch):
    """``executor._run(n, False)`` then ``executor._after_run(n, epoch)`` for a node that is not a
    write and whose result is too small for a pooled buffer.  Returns False, having done
    nothing, for any other node (the caller runs the Python path)."""
    op = n.op
    if op.kind == "write":
        return False
    cdef Py_ssize_t nbytes
    if op.impl_out is not None:
        nbytes = n.dtype.itemsize
        for s in n.shape:
            nbytes *= <Py_ssize_t>s
        if nbytes >= _pool_min_bytes:
            return False
    cdef Node a
    vals = []
    params = n.params
    try:
        for x in n.args:
            if type(x) is Node:
                a = <Node>x
                if a.op is not _VIEW and a.value is not None:
                    vals.append(a.value)
                else:
                    vals.append(_value_of(a))     # (raises a failed input's error)
            else:
                vals.append(x)
        out = op.impl(*vals, **params) if params else op.impl(*vals)
    except BaseException as exc:
        _node_failed(n, exc)
        raise
    if type(out) is not _ndarray_np or out.dtype != n.dtype or out.shape != n.shape or \
            out.base is not None or not out.flags.c_contiguous:
        if not isinstance(out, tuple):
            out = _normalize(out, n, vals)
    n.value = out
    n.state = DONE
    cdef Node r
    with _book_lock:
        for x in n.args:
            if type(x) is Node:
                a = <Node>x
                a.use_count -= 1
                r = <Node>(a.args[0]) if a.op is _VIEW else a
                if r.flush_epoch == epoch:
                    r.readers_left -= 1
                    if r.readers_left == 0 and not r.needed:
                        r.value = None
    if n.has_tree:            # (its tree inputs, kept alive by it, chain back without end)
        n.has_tree = False
        n.tree_inputs = n.tree_floats = n.tree_ints = None
    if not _keep_graph:
        n.params = None
        n.args = ()
    return True


# --- planning a flush (executor._collect and executor._FlushPlan's counts) -------------------

def collect(targets, epoch):
    """``executor._collect``: the pending nodes behind ``targets`` in topological order."""
    order = []
    cdef Node t, node, a
    cdef Py_ssize_t i, n_args
    cdef bint pushed
    for x in targets:
        t = <Node>x
        if t.state != PENDING or t.flush_epoch == epoch:
            continue
        t.flush_epoch = epoch
        nodes = [t]
        positions = [0]
        while nodes:
            top = len(nodes) - 1       # (no negative indices: the module has wraparound off)
            node = <Node>nodes[top]
            i = positions[top]
            args = node.args
            n_args = len(args)
            pushed = False
            while i < n_args:
                y = args[i]
                i += 1
                if type(y) is Node:
                    a = <Node>y
                    if a.state == PENDING and a.flush_epoch != epoch:
                        a.flush_epoch = epoch
                        positions[top] = i
                        nodes.append(a)
                        positions.append(0)
                        pushed = True
                        break
            if not pushed:
                nodes.pop()
                positions.pop()
                order.append(node)
    return order


def plan_counts(list order, targets, epoch):
    """``executor._FlushPlan``'s counts: in-flush uses and buffer readers of each node, what must
    outlive the flush.  Returns ``(external nodes read, has writes, generation bumps)``."""
    cdef Node n, a, r
    cdef bint n_is_view, has_writes = False
    cdef Py_ssize_t bumps = 0
    for x in order:
        n = <Node>x
        n.uses = 0
        n.readers_left = 0
    external = []
    seen = set()
    for x in order:
        n = <Node>x
        if n.op.kind == "write":
            has_writes = True
        n_is_view = n.op is _VIEW
        for y in n.args:
            if type(y) is Node:
                a = <Node>y
                r = <Node>(a.args[0]) if a.op is _VIEW else a
                if a.flush_epoch == epoch:
                    a.uses = a.uses + 1
                if r.flush_epoch == epoch:
                    if not n_is_view:
                        r.readers_left = r.readers_left + 1
                elif id(r) not in seen:
                    seen.add(id(r))
                    external.append(r)
    for x in targets:
        n = <Node>x
        if n.flush_epoch == epoch:
            n.needed = True
    for x in order:
        n = <Node>x
        if n.use_count > n.uses:
            n.needed = True
            bumps += 1
        elif n.exported:
            n.needed = True
    for x in order:
        n = <Node>x
        if n.op is _VIEW and n.needed:
            (<Node>n.args[0]).needed = True
    return external, has_writes, bumps



def schedule_scan(list order, plan):
    """``executor._schedule``'s scan: marks the nodes scheduled and returns ``(work, total
    bytes, largest size, in-place writes, copy-on-write writes)``; a write runs in place
    when ``plan.last_reader_before`` allows it (it then shares its base's engine var)."""
    cdef Node n, h
    cdef Py_ssize_t i = -1, size, nbytes = 0, max_elems = 0, n_inplace = 0, n_copy = 0
    cdef bint inplace
    work = []
    for x in order:
        i += 1
        n = <Node>x
        n.state = SCHEDULED
        op = n.op
        if op is _VIEW:
            continue
        inplace = False
        if op.kind == "write":
            h = <Node>(n.args[0])
            if h.error is None and plan.last_reader_before(h, i):
                inplace = True
                n.engine_var = ((<Node>h.args[0]) if h.op is _VIEW else h).engine_var
                n_inplace += 1
            else:
                n_copy += 1
        size = 1
        for s in n.shape:
            size *= <Py_ssize_t>s
        nbytes += <Py_ssize_t>n.dtype.itemsize * size
        if size > max_elems:
            max_elems = size
        work.append((n, inplace))
    return work, nbytes, max_elems, n_inplace, n_copy


def run_bulk(list items, epoch, run_item, item_failed):
    """``executor._push_bulk``'s loop: plain nodes in the errstate they were recorded under go
    straight to ``run_node``; any other item to ``run_item(item, epoch)``.  A failing item
    is handed to ``item_failed(item, exc)`` and the loop goes on."""
    cdef Node n
    for it in items:
        try:
            if type(it) is tuple and not it[1]:
                n = <Node>(it[0])
                # (run under the logging default errstate: executor._run_item)
                if n.errstate is None and get_value(_extobj_var) is _log_default and \
                        run_node(n, epoch):
                    if _caught:
                        _issue_caught(n)
                    continue
            run_item(it, epoch)
        except BaseException as exc:
            item_failed(it, exc)


# --- keying a recorded gradient (lazynp.autograd.replay.structure, in C) ---------------------------


cdef object _freeze_c(v, freeze, slot_type):
    """``_grad_replay._freeze`` for the common parameters (Python atoms, floats, tuples,
    lists and dicts of them, template slots); anything else goes to ``freeze``."""
    t = type(v)
    if t is int or t is bool or t is str or v is None:
        return (t, v)
    if t is float:
        return (t, v.hex())
    if t is tuple or t is list:
        for x in v:
            if type(x) is not int:
                return (t, tuple([_freeze_c(x, freeze, slot_type) for x in v]))
        return (t, tuple(v))
    if t is dict:
        return (dict, tuple([(k, _freeze_c(x, freeze, slot_type))
                             for k, x in (<dict>v).items()]))
    if t is slot_type:
        return (slot_type, v.k)
    return freeze(v)


def replay_structure(outs, dict tape, inputs, freeze, placeholder, view_op, uncacheable,
                     slot_type):
    """``(key, externals, readers)``: ``_grad_replay.structure`` (its pure Python reference,
    same results); ``freeze`` is its parameter freezer, called for what :func:`_freeze_c`
    does not know; ``slot_type``: ``lazynp.array.indexing._Slot``."""
    cdef dict index = {}
    cdef list items = []
    cdef list externals = []
    cdef list readers = []
    cdef list ak
    cdef list outside
    cdef Node n, a
    cdef object k, key_a, p
    cdef tuple args
    for entry in tape.values():
        n = <Node>(<tuple>entry)[0]
        args = <tuple>(<tuple>entry)[1]
        p = (<tuple>entry)[2]
        if n.state != PENDING or n.errstate is not None:
            raise uncacheable
        ak = []
        outside = None
        for x in args:
            if type(x) is Node:
                a = <Node>x
                key_a = PyLong_FromVoidPtr(<void*>a)
                k = index.get(key_a)
                if k is None:
                    if a.op is placeholder or a.error is not None or key_a in tape:
                        raise uncacheable
                    k = len(items)
                    index[key_a] = k
                    items.append(("x", a.shape, a.dtype))
                    externals.append(a)
                if key_a not in tape:
                    if outside is None:
                        outside = []
                    outside.append(a)
                ak.append(k)
            else:
                ak.append(_freeze_c(x, freeze, slot_type))
        index[PyLong_FromVoidPtr(<void*>n)] = len(items)
        items.append((n.op, tuple(ak), None if p is None else _freeze_c(p, freeze, slot_type),
                      n.shape, n.dtype))
        if outside is not None and n.op is not view_op:
            readers.append((n, outside))
    for o in outs:
        key_a = PyLong_FromVoidPtr(<void*>o)
        if key_a not in index:
            if (<Node>o).op is placeholder or (<Node>o).error is not None:
                raise uncacheable
            index[key_a] = len(items)
            items.append(("x", (<Node>o).shape, (<Node>o).dtype))
            externals.append(o)
    where = tuple([index.get(PyLong_FromVoidPtr(<void*>x), -1) for x in inputs])
    heads = tuple([index[PyLong_FromVoidPtr(<void*>x)] for x in outs])
    return (tuple(items), where, heads), externals, readers


# --- a kernel's strided inputs and type key (kernels/fused.py, kernels/cpu.py, in C) --------------

cdef object _np_uint64 = _numpy.dtype(_numpy.uint64)


def strided_inputs(list vals, tuple shape):
    """``kernels.fused.strided_inputs`` (its pure Python reference, same results) for inputs
    whose dtype is their owner's; NotImplemented where one is not (a complex block's
    ``.real``: the reference handles it) or is no NumPy array."""
    cdef Py_ssize_t ndim = len(shape), nv = len(vals), k, d, lead, vnd
    cdef Py_ssize_t item, off, st
    cdef cnp.ndarray v, owner
    cdef cnp.npy_intp dims[2]
    cdef PyObject *b
    cdef long long *row
    dims[0] = nv
    dims[1] = ndim + 1
    table = cnp.PyArray_ZEROS(2, dims, cnp.NPY_UINT64, 0)
    cdef long long *data = <long long *>cnp.PyArray_DATA(<cnp.ndarray>table)
    cdef list bufs = []
    for k in range(nv):
        o = vals[k]
        if not cnp.PyArray_CheckExact(o):
            return NotImplemented
        v = <cnp.ndarray>o
        owner = v
        while True:
            b = <PyObject *>cnp.PyArray_BASE(owner)
            if b == NULL or not cnp.PyArray_CheckExact(<object>b):
                break
            owner = <cnp.ndarray><object>b
        item = cnp.PyArray_ITEMSIZE(v)
        vnd = cnp.PyArray_NDIM(v)
        if vnd > ndim:
            return NotImplemented
        if <void *>cnp.PyArray_DESCR(owner) != <void *>cnp.PyArray_DESCR(v) and \
                owner.dtype != v.dtype:
            return NotImplemented
        if not cnp.PyArray_IS_C_CONTIGUOUS(owner) or item == 0:
            return None
        off = <Py_ssize_t>(cnp.PyArray_BYTES(v) - cnp.PyArray_BYTES(owner))
        if off % item:
            return None
        row = data + k * (ndim + 1)
        row[0] = off // item
        lead = ndim - vnd
        for d in range(vnd):
            if cnp.PyArray_DIMS(v)[d] != 1 or shape[lead + d] == 1:
                st = cnp.PyArray_STRIDES(v)[d]
                if st % item:
                    return None
                row[1 + lead + d] = st // item
        bufs.append(cnp.PyArray_Ravel(owner, cnp.NPY_CORDER))
    return bufs, table


def post_order(target, tuple ins, bint once):
    """kernels/tree.py's ``_post_order``: a tree's pending nodes in its kernel's order
    (post-order, arguments left to right; an argument that is not a node is a constant,
    one of ``ins`` an input) and, with ``once``, each computed once and its repeated reads
    as ``((read, k), ...)``.  (A walk of a 30-op tree took 20-40 us in Python.)"""
    cdef dict done = {}
    cdef list order = [], sig = [], nodes = [target], starts = [0]
    cdef Py_ssize_t reads = 0, i, n, j, nin = len(ins)
    cdef object node, a, k, args
    cdef bint input_, descended
    while nodes:
        node = nodes.pop()
        i = starts.pop()
        args = (<Node>node).args
        n = len(args)
        descended = False
        while i < n:
            a = args[i]
            i += 1
            if type(a) is not Node:
                continue
            input_ = False
            for j in range(nin):
                if ins[j] is a:
                    input_ = True
                    break
            if input_:
                continue
            reads += 1
            if once:
                k = done.get(a)
                if k is not None:
                    sig.append((reads, k))
                    continue
            nodes.append(node)
            starts.append(i)
            nodes.append(a)
            starts.append(0)
            descended = True
            break
        if not descended:
            done[node] = len(order)
            order.append(node)
    return order, tuple(sig)


def stride_classes(table, Py_ssize_t column):
    """Per row of a :func:`strided_inputs` table, its stride in ``column`` as a class:
    ``z`` (0), ``u`` (1) or ``s`` (any other); kernels/tree.py's ``inner``."""
    cdef cnp.ndarray t = <cnp.ndarray>table
    cdef Py_ssize_t rows = cnp.PyArray_DIMS(t)[0], cols = cnp.PyArray_DIMS(t)[1], k
    cdef long long *data = <long long *>cnp.PyArray_DATA(t)
    cdef long long s
    chars = bytearray(rows)
    for k in range(rows):
        s = data[k * cols + column]
        chars[k] = 122 if s == 0 else 117 if s == 1 else 115     # z, u, s
    return chars.decode("ascii")


cdef object _array_type_key(cnp.ndarray a):
    cdef int f = cnp.PyArray_FLAGS(a)
    return (a.dtype, cnp.PyArray_NDIM(a), (f & cnp.NPY_ARRAY_C_CONTIGUOUS) != 0,
            (f & cnp.NPY_ARRAY_F_CONTIGUOUS) != 0, (f & cnp.NPY_ARRAY_WRITEABLE) != 0,
            (f & cnp.NPY_ARRAY_ALIGNED) != 0)


cdef object _one_type_key(a):
    t = type(a)
    if cnp.PyArray_CheckExact(a):
        return _array_type_key(<cnp.ndarray>a)
    if t is tuple:
        return (tuple, tuple([_one_type_key(x) for x in <tuple>a]))
    if t is int or t is float or t is bool:
        return t
    return (t, a)


def type_key(args):
    """``kernels.cpu._type_key`` of each of ``args`` (its pure Python reference, same
    results), as a tuple."""
    return tuple([_one_type_key(a) for a in args])
