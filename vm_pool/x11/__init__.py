"""The local provider's hands and eyes on an X display: the controller (actions and
observations in-process) and input through XTEST.
"""
