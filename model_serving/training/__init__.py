"""Fine-tuning with TRL and PEFT LoRA on Tandem's dataset exports (no Django in the trainer).

``spec`` says what a run is asked to do, ``data`` fetches and checks its dataset files,
``trainer`` runs the stages; ``model_serving.finetune`` is the job around them.
"""
