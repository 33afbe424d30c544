"""Devices: the backend protocol (``base``) beside its implementations (``sim``, ``amd``, ``nvidia``).

``base`` never imports an implementation (as ml-energy/zeus keeps
``device/gpu/common.py``); ``report`` holds what each backend says it found,
``devices`` gathers the reports, ``workloads`` builds PyTorch / hip-python
kernels for the hardware backends, ``amd_sysfs`` finds AMD devices in sysfs.
"""
