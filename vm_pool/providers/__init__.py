"""Desktop providers: where desktops run (local process groups, containers, cloud machines).

The interface is in ``base``; ``registry.get_provider`` loads the ones a deployment names.
Nothing in this package's init imports Django: the in-desktop agent imports provider modules
on machines that run no Django.
"""
