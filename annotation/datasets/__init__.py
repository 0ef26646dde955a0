"""What recordings become: the pair builder (SFT, DPO, CT samples), the file formats, and
export jobs with their archives.
Floor 3: imports episodes/, projects/ and models/; never rollouts/.
"""
