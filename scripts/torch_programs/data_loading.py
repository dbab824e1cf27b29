""""Writing custom datasets, dataloaders and transforms": a Dataset of samples as dicts,
transforms as callable classes composed in order, and a DataLoader that collates dicts."""
from __future__ import annotations

from typing import Any

import numpy as np


def data_loading(torch: Any) -> dict:
    Dataset, DataLoader = torch.utils.data.Dataset, torch.utils.data.DataLoader
    rng = np.random.default_rng(13)
    images = [rng.integers(0, 256, (20 + 2 * i, 18 + i, 3)).astype(np.uint8) for i in range(6)]
    marks = [rng.random((68, 2)) * 16 for _ in range(6)]

    class FaceLandmarksDataset(Dataset):
        """Face Landmarks dataset."""

        def __init__(self, samples, transform=None):
            self.samples = samples
            self.transform = transform

        def __len__(self):
            return len(self.samples)

        def __getitem__(self, idx):
            if torch.is_tensor(idx):
                idx = idx.tolist()
            image, landmarks = self.samples[idx]
            landmarks = np.array([landmarks]).astype("float").reshape(-1, 2)
            sample = {"image": image, "landmarks": landmarks}
            if self.transform:
                sample = self.transform(sample)
            return sample

    class CenterCrop:
        """Crop the image in a sample to ``output_size`` around its centre."""

        def __init__(self, output_size):
            assert isinstance(output_size, (int, tuple))
            self.output_size = (output_size, output_size) if isinstance(output_size, int) else output_size

        def __call__(self, sample):
            image, landmarks = sample["image"], sample["landmarks"]
            h, w = image.shape[:2]
            new_h, new_w = self.output_size
            top, left = (h - new_h) // 2, (w - new_w) // 2
            image = image[top: top + new_h, left: left + new_w]
            landmarks = landmarks - [left, top]
            return {"image": image, "landmarks": landmarks}

    class ToTensor:
        """Convert ndarrays in sample to Tensors."""

        def __call__(self, sample):
            image, landmarks = sample["image"], sample["landmarks"]
            image = image.transpose((2, 0, 1))  # numpy H x W x C -> torch C x H x W
            return {"image": torch.from_numpy(image), "landmarks": torch.from_numpy(landmarks)}

    class Compose:
        def __init__(self, transforms):
            self.transforms = transforms

        def __call__(self, sample):
            for t in self.transforms:
                sample = t(sample)
            return sample

    dataset = FaceLandmarksDataset(list(zip(images, marks)), transform=Compose([CenterCrop(16), ToTensor()]))
    first = dataset[torch.tensor(2)]
    dataloader = DataLoader(dataset, batch_size=4, shuffle=False, num_workers=0)
    batches = []
    for i_batch, sample_batched in enumerate(dataloader):
        batches.append((i_batch, list(sample_batched["image"].size()), list(sample_batched["landmarks"].size())))
    last = sample_batched
    shuffled = DataLoader(dataset, batch_size=3, shuffle=True, generator=torch.Generator().manual_seed(0))
    seen = sorted(float(b["landmarks"][j, 0, 0]) for b in shuffled for j in range(len(b["landmarks"])))
    return {"len": len(dataset), "first_image": first["image"], "first_landmarks": first["landmarks"],
            "batch_shapes": str(batches), "image_dtype": str(last["image"].dtype).split(".")[-1],
            "landmarks_dtype": str(last["landmarks"].dtype).split(".")[-1],
            "last_batch_images": last["image"], "shuffle_sees_every_sample":
            seen == sorted(float(m[0, 0]) for m in [dataset[i]["landmarks"] for i in range(6)])}
