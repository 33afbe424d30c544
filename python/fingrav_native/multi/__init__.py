"""Many GPUs (paper Section V-D): host-clock alignment between ranks and merged node profiles.

``alignment`` places every rank's host clock on the root's (bracketed
exchanges over ``torch.distributed``); ``results`` holds the node profile
types; ``node`` drives one campaign per rank and merges them.
"""
