"""Recording a person on a desktop: their raw input reduced to steps of the action space."""
