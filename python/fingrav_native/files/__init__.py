"""Files: versioned profile files (``profiles``; no pickle) and Perfetto / Chrome traces (``trace``)."""
