# As in Triton 3.6: the active driver is created on first use from the backends that find a GPU;
# in the compile sandbox (no GPU) there is none. Tools may set one (set_active).
class DriverConfig:
    def __init__(self):
        self._active = None

    @property
    def active(self):
        if self._active is None:
            raise RuntimeError("0 active drivers ([]). There should only be one.")
        return self._active

    def set_active(self, driver):
        self._active = driver

    def reset_active(self):
        self._active = None


driver = DriverConfig()
