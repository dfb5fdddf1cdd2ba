"""The lifetime every radixkv object that owns one C handle shares.

An Owned object holds its handle in ``_h`` until ``close()`` (or the
``with`` block, or garbage collection) hands it to ``_destroy``, once;
``handle`` refuses a closed object instead of passing NULL to C. A class
sets ``_kind`` (its name in messages) and ``_destroy`` (the C destructor);
one that must do more around destruction overrides ``close``.
"""


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
