"""radixkv.Error and one subclass per rkv_status.

Owns: the mapping from a failing rkv_status to the exception raised. Every
exception carries ``status`` (the int code), ``status_name`` (the C enum
name), ``function`` (the C call) and ``detail`` (rkv_last_error() read right
after the failing call, on the same thread).
"""


class Error(Exception):
    """A radixkv C call failed. Subclasses name the rkv_status."""

    status = -1
    status_name = "RKV_ERR_UNKNOWN"

    def __init__(self, function="", detail="", status=None):
        if status is not None:
            self.status = status
        self.function = function
        self.detail = detail
        msg = detail or self.status_name
        super().__init__(f"{function}: {msg} ({self.status_name})" if function else msg)


def _sub(name, code, cname, doc, base=Error):
    return type(name, (base,), {"status": code, "status_name": cname, "__doc__": doc})


# Also a ValueError, so code that catches bad input the Python way works.
InvalidArgError = type("InvalidArgError", (Error, ValueError),
                       {"status": 1, "status_name": "RKV_ERR_INVALID_ARG",
                        "__doc__": "NULL, out of range, wrong length, bad token."})
OutOfMemoryError = type("OutOfMemoryError", (Error, MemoryError),
                        {"status": 2, "status_name": "RKV_ERR_NOMEM",
                         "__doc__": "Host memory allocation failed."})
NoSpaceError = _sub("NoSpaceError", 3, "RKV_ERR_NO_SPACE",
                    "No free KV block, even after eviction.")
StateError = _sub("StateError", 4, "RKV_ERR_STATE",
                  "Not valid now (unlock without lock, commit without a step, ...).")
StaleHandleError = _sub("StaleHandleError", 5, "RKV_ERR_STALE_HANDLE",
                        "Node handle from before a reset or eviction.")
BusyError = _sub("BusyError", 6, "RKV_ERR_BUSY",
                 "Refused while paths are locked or requests run.")
NotFoundError = _sub("NotFoundError", 7, "RKV_ERR_NOT_FOUND", "Unknown request id.")
DuplicateError = _sub("DuplicateError", 8, "RKV_ERR_DUPLICATE",
                      "Request id already submitted.")
CudaError = _sub("CudaError", 9, "RKV_ERR_CUDA", "A CUDA runtime or cuBLAS call failed.")
NoDeviceError = _sub("NoDeviceError", 10, "RKV_ERR_NO_DEVICE",
                     "Built without CUDA, or no usable GPU.")
UnsupportedError = _sub("UnsupportedError", 11, "RKV_ERR_UNSUPPORTED",
                        "Valid but not supported.")
FormatError = _sub("FormatError", 12, "RKV_ERR_FORMAT", "Malformed input data.")
IoError = _sub("IoError", 13, "RKV_ERR_IO", "A file could not be read or written.")
CorruptError = _sub("CorruptError", 14, "RKV_ERR_CORRUPT",
                    "A *_check() found a broken invariant.")
PinCapError = _sub("PinCapError", 15, "RKV_ERR_PIN_CAP",
                   "A pin would take pinned pages past the tree's cap.")

BY_STATUS = {c.status: c for c in (
    InvalidArgError, OutOfMemoryError, NoSpaceError, StateError, StaleHandleError,
    BusyError, NotFoundError, DuplicateError, CudaError, NoDeviceError,
    UnsupportedError, FormatError, IoError, CorruptError, PinCapError)}


def error_for(status, function, detail):
    """The exception instance for a failing status (unknown codes: Error)."""
    cls = BY_STATUS.get(status)
    if cls is None:
        return Error(function, detail, status=status)
    return cls(function, detail)
