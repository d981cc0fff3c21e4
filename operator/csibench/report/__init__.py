"""Reading results: the step table of one run (``render``) and two runs side by side (``compare``)."""
