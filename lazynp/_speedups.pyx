# cython: language_level=3, boundscheck=False, wraparound=False
"""C versions of the per-operation hot path: ``Node``, ``Var``, ``record``, the binary
dunders of ``lazynp.ndarray``, ufunc calls on lazy arrays and Python scalars, the scan of
live pending arrays that a flush makes, a flush's planning loops (collect, counts, schedule
scan), its bulk loop and the execution of plain nodes, and array data offsets.

Recording one operation in Python costs about 2.5 µs (a Node, a Var and its weakref, the
array, the error site, the tree-kernel structure); NumPy itself spends about 0.5 µs on a
small array.  This module does the same work in C.  It is built by ``pip install`` when a C
compiler is available; without it (or with ``LAZYNP_PURE_PYTHON=1``) lazynp runs the pure
Python versions in ``graph.py`` and ``_ufunc.py``, which are the reference for what follows
and are tested against it.
"""
from cpython.contextvars cimport get_value
from cpython.weakref cimport PyWeakref_NewRef

cdef extern from *:
    """
    static PyObject *lz_alloc(PyObject *cls) {
        PyTypeObject *t = (PyTypeObject *)cls;
        return t->tp_alloc(t, 0);
    }
    static int lz_set_slot(PyObject *desc, PyObject *obj, PyObject *value) {
        return Py_TYPE(desc)->tp_descr_set(desc, obj, value);
    }
    static PyObject *lz_get_slot(PyObject *desc, PyObject *obj) {
        return Py_TYPE(desc)->tp_descr_get(desc, obj, (PyObject *)Py_TYPE(obj));
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
    """
    object lz_alloc(object cls)
    int lz_set_slot(object desc, object obj, object value) except -1
    object lz_get_slot(object desc, object obj)
    object lz_user_code(object pkg, int *lasti)

DEF PENDING = 0


cdef class Node:
    """One recorded value: ``op(*args, **params)`` with known shape and dtype."""

    cdef public object op, args, params, shape, dtype, value, evar, exported, error
    cdef public object fl, pos, uses, rem, needed, ext
    cdef public int state
    cdef public Py_ssize_t nuse
    cdef object __weakref__
    # ``site`` and ``fx`` (graph.Node) unpacked: no tuple to allocate per recorded op
    cdef object site_code
    cdef int site_lasti
    cdef bint has_fx
    cdef Py_ssize_t fx_sid, fx_size, fx_gen
    cdef object fx_ins, fx_kf, fx_ki

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
    def fx(self):
        """Tree-kernel structure ``(id, inputs, float consts, int consts, size, generation)``
        (kernels/tree.py), or None."""
        if not self.has_fx:
            return None
        return (self.fx_sid, self.fx_ins, self.fx_kf, self.fx_ki, self.fx_size, self.fx_gen)

    @fx.setter
    def fx(self, value):
        if value is None:
            self.has_fx = False
            self.fx_ins = self.fx_kf = self.fx_ki = None
        else:
            self.has_fx = True
            (self.fx_sid, self.fx_ins, self.fx_kf, self.fx_ki, self.fx_size,
             self.fx_gen) = value

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
    n.nuse = 0
    n.exported = False
    n.fl = 0
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


#: weakrefs to Vars that got a pending head since the last flush (graph._pending_vars)
pending_vars = []
state = RecordState()

# set once by configure(): objects of graph.py, kernels/tree.py and ndarray.py
cdef object _bound_flush, _extobj_var, _default_ext, _pkg
cdef object _tree_ids, _tree_structure, _merge_inputs, _graph_dict
cdef Py_ssize_t _max_tree = 0
cdef object _array_cls, _slot_var, _slot_shadow, _slot_geom, _slot_scalar


def configure(*, bound_flush, extobj_var, default_ext, pkg, tree_ids,
              tree_structure, merge_inputs, max_tree, graph_dict, max_pending):
    """Hand the recorder graph.py's objects (called once, when graph.py is imported)."""
    global _bound_flush, _extobj_var, _default_ext, _pkg, _tree_ids
    global _tree_structure, _merge_inputs, _max_tree, _graph_dict
    _bound_flush = bound_flush
    _extobj_var = extobj_var
    _default_ext = default_ext
    _pkg = pkg
    _tree_ids = tree_ids
    _tree_structure = tree_structure
    _merge_inputs = merge_inputs
    _max_tree = max_tree
    _graph_dict = graph_dict
    state.max_pending = max_pending


def configure_array(cls):
    """The ``ndarray`` class whose instances the dunders create."""
    global _array_cls, _slot_var, _slot_shadow, _slot_geom, _slot_scalar
    _array_cls = cls
    _slot_var = cls.__dict__["_var"]
    _slot_shadow = cls.__dict__["_shadow"]
    _slot_geom = cls.__dict__["_geom"]
    _slot_scalar = cls.__dict__["_scalar"]


cdef Py_ssize_t _tree(Node n, op, args, shape, bint count_uses) except -1:
    """Set ``n``'s tree-kernel structure; with ``count_uses`` count its arguments' uses; the
    tree's size, 0 when none (graph._tree_structure)."""
    cdef list key = [op]
    cdef tuple ins = (), kf = (), ki = ()
    cdef Py_ssize_t size = 1, gen = state.generation, k
    cdef bint ok = True
    cdef Node an
    for a in args:
        t = type(a)
        if t is Node:
            an = <Node>a
            if count_uses:
                an.nuse += 1
            if not ok:
                continue
            if an.shape != shape:
                ok = False
            elif an.state == PENDING:
                if not an.has_fx:
                    ok = False
                    continue
                if ins:
                    ins, remap = _merge_inputs(ins, an.fx_ins)
                    key.append(("t", an.fx_sid, remap))
                else:
                    key.append(an.fx_sid)
                    ins = an.fx_ins
                kf += an.fx_kf
                ki += an.fx_ki
                size += an.fx_size
                if an.fx_gen < gen:
                    gen = an.fx_gen
            elif a in ins:
                key.append(~ins.index(a))
            else:
                key.append(an.dtype)
                ins += (a,)
        elif t is float:
            key.append(float)
            kf += (a,)
        elif t is int and 0 <= a <= 127:
            key.append(int)
            ki += (a,)
        else:
            ok = False
    if not ok or not ins:
        return 0
    if size <= _max_tree:
        tkey = tuple(key)
        sid = _tree_ids.get(tkey, -1)
        if sid == -1:
            sid = _tree_structure(tkey, n)
        if sid is not None:
            n.has_fx = True
            n.fx_sid = sid
            n.fx_ins = ins
            n.fx_kf = kf
            n.fx_ki = ki
            n.fx_size = size
            n.fx_gen = gen
    return size


cdef dict _tree_ops = {}     # op -> an elementwise ufunc op (kernels/tree.py structures)


cdef inline bint _is_tree_op(op):
    known = _tree_ops.get(op)
    if known is None:
        known = _tree_ops[op] = op.ufunc is not None and op.kind == "elementwise"
    return known is True


cpdef Node record(op, args, params, shape, dtype):
    """Add a node to the pending graph (no work runs) and return it (graph.record)."""
    cdef Node n = Node.__new__(Node)
    _init_node(n, op, args, params, shape, dtype)
    code = lz_user_code(_pkg, &n.site_lasti)
    if code is not None:
        n.site_code = code
    ext = get_value(_extobj_var)
    if ext is _default_ext and params is None and _is_tree_op(op):
        if _tree(n, op, args, shape, True) > _max_tree and not _graph_dict["keep_graph"]:
            # a chain grown past a tree kernel's size: compute its pending arguments now
            # (each one tree kernel), and start a new tree on their values
            flush = _graph_dict["flush"]
            for a in args:
                if type(a) is Node and (<Node>a).state == PENDING and (<Node>a).has_fx:
                    flush([a])
            _tree(n, op, args, shape, False)
    else:
        if ext is not _default_ext:
            n.ext = ext     # the user's np.errstate at the recording line applies when it runs
        for a in args:
            if type(a) is Node:
                (<Node>a).nuse += 1
    state.pending_count += 1
    state.n_recorded += 1
    if state.pending_count >= state.max_pending:
        _bound_flush()
    return n


cdef object _record_obj = record


cdef inline object _node_of(a):
    """``a._node()``: the head of its Var, or a view node for a view."""
    if lz_get_slot(_slot_geom, a) is None:
        return (<Var>lz_get_slot(_slot_var, a)).head
    return a._node()


cdef object _new_array(Node node, bint scalar):
    """``ndarray._from_node(node, scalar)``: the array, its Var and the Var's weakref."""
    cdef Var v = Var.__new__(Var)
    v.head = node
    pending_vars.append(PyWeakref_NewRef(v, None))
    arr = lz_alloc(_array_cls)
    lz_set_slot(_slot_var, arr, v)
    lz_set_slot(_slot_shadow, arr, None)
    lz_set_slot(_slot_geom, arr, None)
    lz_set_slot(_slot_scalar, arr, scalar)
    return arr


cdef inline object _record_hooked(op, tuple args, shape, dt):
    """``graph.record``: this module's, or the hook autograd installed in its place."""
    rec = _graph_dict["record"]
    if rec is _record_obj:
        return record(op, args, None, shape, dt)
    return rec(op, args, None, shape, dt)


cdef class UfuncInfo:
    """What the C call path of a lazy ufunc needs (``ufunc._c``): for one input, the op and
    its dtype cache; for two, its dunders (``binary(a, b)`` and ``binary_r(b, a)``)."""

    cdef object op, np_uf, dtypes, result_dtypes, binary, binary_r

    def __init__(self, op, np_uf, dtypes, result_dtypes, binary=None, binary_r=None):
        self.op = op
        self.np_uf = np_uf
        self.dtypes = dtypes
        self.result_dtypes = result_dtypes
        self.binary = binary
        self.binary_r = binary_r


cdef inline bint _py_scalar(t):
    return t is float or t is int or t is bool or t is complex


def ufunc_call(self, *args, **kwargs):
    """``lazynp.ufunc.__call__``: ``np.exp(a)``, ``np.add(a, b)``, ``np.maximum(a, 0)`` on
    lazy arrays and Python scalars in C; everything else by the Python method ``_call_py``."""
    info = self._c
    if info is None or kwargs:
        return self._call_py(*args, **kwargs)
    cdef UfuncInfo u = <UfuncInfo>info
    cdef Py_ssize_t nargs = len(args)
    if nargs == 1 and u.binary is None and type(args[0]) is _array_cls:
        na = _node_of(args[0])
        key = ((<Node>na).dtype,)
        dt = u.dtypes.get(key)
        if dt is None:
            dt = u.result_dtypes(u.np_uf, key)[0]
            u.dtypes[key] = dt
        shape = (<Node>na).shape
        return _new_array(_record_hooked(u.op, (na,), shape, dt), shape == ())
    if nargs == 2 and u.binary is not None:
        a = args[0]
        b = args[1]
        if type(a) is _array_cls:
            if type(b) is _array_cls or _py_scalar(type(b)):
                return u.binary(a, b)
        elif type(b) is _array_cls and _py_scalar(type(a)):
            return u.binary_r(b, a)
    return self._call_py(*args, **kwargs)


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
        elif tb is _array_cls:
            nb = _node_of(b)
            kb = (<Node>nb).dtype
            sb = (<Node>nb).shape
        else:
            if sequence_aware and lz_get_slot(_slot_scalar, a) and \
                    (tb is list or tb is tuple or tb is str):
                return NotImplemented
            return uf(b, a) if reflected else uf(a, b)
        na = _node_of(a)
        ka = (<Node>na).dtype
        if tb is int and not 0 <= b <= 127:
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
            shape = broadcast_shapes(sa, sb)
        return _new_array(_record_hooked(op, (nb, na) if reflected else (na, nb), shape, dt),
                          shape == ())
    return f


def live_pending_heads():
    """Pending heads of live Vars (each once); drops dead or computed entries from
    ``pending_vars`` (graph._live_pending_heads, in C)."""
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


# --- running a plain node (graph._run + graph._after_run) ---------------------------------------

DEF DONE = 2

cdef object _VIEW = None, _book_lock = None, _pool = None, _value_of = None
cdef object _normalize = None, _node_failed = None, _ndarray_np = None


def configure_executor(*, view, book_lock, pool, value_of, normalize, node_failed, ndarray):
    """Hand the executor graph.py's objects (called once, when graph.py is imported)."""
    global _VIEW, _book_lock, _pool, _value_of, _normalize, _node_failed, _ndarray_np
    _VIEW = view
    _book_lock = book_lock
    _pool = pool
    _value_of = value_of
    _normalize = normalize
    _node_failed = node_failed
    _ndarray_np = ndarray


def run_node(Node n, epoch):
    """``graph._run(n, False)`` then ``graph._after_run(n, epoch)`` for a node that is not a
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
        if nbytes >= <Py_ssize_t>_pool.MIN_BYTES:
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
                a.nuse -= 1
                r = <Node>(a.args[0]) if a.op is _VIEW else a
                if r.fl == epoch:
                    r.rem -= 1
                    if r.rem == 0 and not r.needed:
                        r.value = None
    if not _graph_dict["keep_graph"]:
        n.params = None
        n.args = ()
    return True


# --- planning a flush (graph._collect and graph._Plan's counts) ---------------------------------

def collect(targets, epoch):
    """``graph._collect``: the pending nodes behind ``targets`` in topological order."""
    order = []
    cdef Node t, node, a
    cdef Py_ssize_t i, n_args
    cdef bint pushed
    for x in targets:
        t = <Node>x
        if t.state != PENDING or t.fl == epoch:
            continue
        t.fl = epoch
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
                    if a.state == PENDING and a.fl != epoch:
                        a.fl = epoch
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
    """``graph._Plan``'s counts: in-flush uses and buffer readers of each node, what must
    outlive the flush.  Returns ``(external nodes read, has writes, generation bumps)``."""
    cdef Node n, a, r
    cdef bint n_is_view, has_writes = False
    cdef Py_ssize_t bumps = 0
    for x in order:
        n = <Node>x
        n.uses = 0
        n.rem = 0
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
                if a.fl == epoch:
                    a.uses = a.uses + 1
                if r.fl == epoch:
                    if not n_is_view:
                        r.rem = r.rem + 1
                elif id(r) not in seen:
                    seen.add(id(r))
                    external.append(r)
    for x in targets:
        n = <Node>x
        if n.fl == epoch:
            n.needed = True
    for x in order:
        n = <Node>x
        if n.nuse > n.uses:
            n.needed = True
            bumps += 1
        elif n.exported:
            n.needed = True
    for x in order:
        n = <Node>x
        if n.op is _VIEW and n.needed:
            (<Node>n.args[0]).needed = True
    return external, has_writes, bumps


DEF SCHEDULED = 1


def schedule_scan(list order, plan):
    """``graph._schedule``'s scan: marks the nodes scheduled and returns ``(work, total
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
                n.evar = ((<Node>h.args[0]) if h.op is _VIEW else h).evar
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
    """``graph._push_bulk``'s loop: plain nodes in the errstate they were recorded under go
    straight to ``run_node``; any other item to ``run_item(item, epoch)``.  A failing item
    is handed to ``item_failed(item, exc)`` and the loop goes on."""
    cdef Node n
    for it in items:
        try:
            if type(it) is tuple and not it[1]:
                n = <Node>(it[0])
                want = n.ext if n.ext is not None else _default_ext
                if get_value(_extobj_var) is want and run_node(n, epoch):
                    continue
            run_item(it, epoch)
        except BaseException as exc:
            item_failed(it, exc)
