"""The lifetime every radixkv object that owns one C handle shares.

An Owned object holds its handle in ``_h`` until ``close()`` (or the
``with`` block, or garbage collection) hands it to ``_destroy``, once;
``handle`` refuses a closed object instead of passing NULL to C. A class
sets ``_kind`` (its name in messages) and ``_destroy`` (the C destructor);
one that must do more around destruction overrides ``close``.

``_out``, ``_query`` and ``_check`` are the shapes most calls take: fill
one out-parameter (a ctypes scalar or struct, last argument) through the
handle, the same as a dict, or verify the object's invariants;
``c_property`` is a read-only fact the C object answers from its handle.
"""
import ctypes as C

from ._ffi import check, lib


def c_property(function, doc=None):
    """A read-only property: ``function(handle)``'s return value."""
    return property(lambda self: getattr(lib, function)(self.handle), doc=doc)


class Owned:
    _kind = "object"
    _h = None

    @property
    def handle(self):
        """The C pointer (an int), for other bindings."""
        if not self._h:
            raise ValueError(f"radixkv.{self._kind} is closed")
        return self._h

    def _destroy(self, h):
        raise NotImplementedError

    def _out(self, function, ctype, *args):
        """``function(handle, *args, &out)`` into a new ``ctype``: returns it."""
        out = ctype()
        check(getattr(lib, function)(self.handle, *args, C.byref(out)), function)
        return out

    def _query(self, function, struct, *args):
        """``_out`` for a struct, as a dict."""
        return self._out(function, struct, *args).to_dict()

    def _check(self, function):
        """``function(handle)``: raises CorruptError with what is broken."""
        check(getattr(lib, function)(self.handle), function)

    def close(self):
        """Destroys the C object (once; later calls do nothing)."""
        if getattr(self, "_h", None):
            self._destroy(self._h)
            self._h = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        try:
            self.close()
        except Exception:  # interpreter shutdown: the library may be gone
            pass
