"""Fast neural style transfer (Johnson et al., 2016), written as pytorch/examples' fast_neural_style is:
neural_style/transformer_net.py's TransformerNet (reflection padding, InstanceNorm2d(affine=True), five residual
blocks, nearest Upsample then convolution), utils.py's gram_matrix and normalize_batch (an in-place div_ of the
network's output) and neural_style.py's train(): content loss on relu2_2, style loss on the Gram matrices of four
feature maps, Adam, then `torch.save(transformer.state_dict(), path)` and stylize() loading it back in eval mode.
Changed: torchvision's pretrained VGG16 (a download) is a small frozen VGG-shaped network of random weights with
vgg.py's four slices and namedtuple outputs; the COCO images and the style image are random smooth 32x32 images
made here (values 0-255 as ToTensor + mul(255) give); epochs, image size and batch count from the command line.

Written for PyTorch; the tests run it unmodified with `python -m fnx run`.
Usage: fast_neural_style.py [--epochs N] [--batches N] [--image-size N] [--save-model-dir DIR]
"""
import argparse
import os
import time
from collections import namedtuple

import numpy as np
import torch
from torch.optim import Adam
from torch.utils.data import DataLoader, TensorDataset


class TransformerNet(torch.nn.Module):
    def __init__(self):
        super(TransformerNet, self).__init__()
        # Initial convolution layers
        self.conv1 = ConvLayer(3, 32, kernel_size=9, stride=1)
        self.in1 = torch.nn.InstanceNorm2d(32, affine=True)
        self.conv2 = ConvLayer(32, 64, kernel_size=3, stride=2)
        self.in2 = torch.nn.InstanceNorm2d(64, affine=True)
        self.conv3 = ConvLayer(64, 128, kernel_size=3, stride=2)
        self.in3 = torch.nn.InstanceNorm2d(128, affine=True)
        # Residual layers
        self.res1 = ResidualBlock(128)
        self.res2 = ResidualBlock(128)
        self.res3 = ResidualBlock(128)
        self.res4 = ResidualBlock(128)
        self.res5 = ResidualBlock(128)
        # Upsampling Layers
        self.deconv1 = UpsampleConvLayer(128, 64, kernel_size=3, stride=1, upsample=2)
        self.in4 = torch.nn.InstanceNorm2d(64, affine=True)
        self.deconv2 = UpsampleConvLayer(64, 32, kernel_size=3, stride=1, upsample=2)
        self.in5 = torch.nn.InstanceNorm2d(32, affine=True)
        self.deconv3 = ConvLayer(32, 3, kernel_size=9, stride=1)
        # Non-linearities
        self.relu = torch.nn.ReLU()

    def forward(self, X):
        y = self.relu(self.in1(self.conv1(X)))
        y = self.relu(self.in2(self.conv2(y)))
        y = self.relu(self.in3(self.conv3(y)))
        y = self.res1(y)
        y = self.res2(y)
        y = self.res3(y)
        y = self.res4(y)
        y = self.res5(y)
        y = self.relu(self.in4(self.deconv1(y)))
        y = self.relu(self.in5(self.deconv2(y)))
        y = self.deconv3(y)
        return y


class ConvLayer(torch.nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size, stride):
        super(ConvLayer, self).__init__()
        reflection_padding = kernel_size // 2
        self.reflection_pad = torch.nn.ReflectionPad2d(reflection_padding)
        self.conv2d = torch.nn.Conv2d(in_channels, out_channels, kernel_size, stride)

    def forward(self, x):
        out = self.reflection_pad(x)
        out = self.conv2d(out)
        return out


class ResidualBlock(torch.nn.Module):
    """ResidualBlock, introduced in https://arxiv.org/abs/1512.03385"""

    def __init__(self, channels):
        super(ResidualBlock, self).__init__()
        self.conv1 = ConvLayer(channels, channels, kernel_size=3, stride=1)
        self.in1 = torch.nn.InstanceNorm2d(channels, affine=True)
        self.conv2 = ConvLayer(channels, channels, kernel_size=3, stride=1)
        self.in2 = torch.nn.InstanceNorm2d(channels, affine=True)
        self.relu = torch.nn.ReLU()

    def forward(self, x):
        residual = x
        out = self.relu(self.in1(self.conv1(x)))
        out = self.in2(self.conv2(out))
        out = out + residual
        return out


class UpsampleConvLayer(torch.nn.Module):
    """Upsamples the input and then does a convolution (fewer checkerboard artifacts than ConvTranspose2d)."""

    def __init__(self, in_channels, out_channels, kernel_size, stride, upsample=None):
        super(UpsampleConvLayer, self).__init__()
        self.upsample = upsample
        if upsample:
            self.upsample_layer = torch.nn.Upsample(mode='nearest', scale_factor=upsample)
        reflection_padding = kernel_size // 2
        self.reflection_pad = torch.nn.ReflectionPad2d(reflection_padding)
        self.conv2d = torch.nn.Conv2d(in_channels, out_channels, kernel_size, stride)

    def forward(self, x):
        x_in = x
        if self.upsample:
            x_in = self.upsample_layer(x_in)
        out = self.reflection_pad(x_in)
        out = self.conv2d(out)
        return out


class Vgg16(torch.nn.Module):
    """vgg.py's four slices of VGG16's features (up to relu1_2, relu2_2, relu3_3, relu4_3), 8 times narrower and
    with random weights in place of torchvision's pretrained ones."""

    def __init__(self, requires_grad=False):
        super(Vgg16, self).__init__()
        widths = [3, 8, 8, 'M', 16, 16, 'M', 32, 32, 32, 'M', 64, 64, 64]
        vgg_pretrained_features = torch.nn.Sequential()
        channels = widths[0]
        for w in widths[1:]:
            if w == 'M':
                vgg_pretrained_features.append(torch.nn.MaxPool2d(kernel_size=2, stride=2))
            else:
                vgg_pretrained_features.append(torch.nn.Conv2d(channels, w, kernel_size=3, padding=1))
                vgg_pretrained_features.append(torch.nn.ReLU(inplace=True))
                channels = w
        self.slice1 = torch.nn.Sequential()
        self.slice2 = torch.nn.Sequential()
        self.slice3 = torch.nn.Sequential()
        self.slice4 = torch.nn.Sequential()
        for x in range(4):
            self.slice1.add_module(str(x), vgg_pretrained_features[x])
        for x in range(4, 9):
            self.slice2.add_module(str(x), vgg_pretrained_features[x])
        for x in range(9, 16):
            self.slice3.add_module(str(x), vgg_pretrained_features[x])
        for x in range(16, 23):
            self.slice4.add_module(str(x), vgg_pretrained_features[x])
        if not requires_grad:
            for param in self.parameters():
                param.requires_grad = False

    def forward(self, X):
        h = self.slice1(X)
        h_relu1_2 = h
        h = self.slice2(h)
        h_relu2_2 = h
        h = self.slice3(h)
        h_relu3_3 = h
        h = self.slice4(h)
        h_relu4_3 = h
        vgg_outputs = namedtuple("VggOutputs", ['relu1_2', 'relu2_2', 'relu3_3', 'relu4_3'])
        out = vgg_outputs(h_relu1_2, h_relu2_2, h_relu3_3, h_relu4_3)
        return out


def gram_matrix(y):
    (b, ch, h, w) = y.size()
    features = y.view(b, ch, w * h)
    features_t = features.transpose(1, 2)
    gram = features.bmm(features_t) / (ch * h * w)
    return gram


def normalize_batch(batch):
    # normalize using imagenet mean and std
    mean = batch.new_tensor([0.485, 0.456, 0.406]).view(-1, 1, 1)
    std = batch.new_tensor([0.229, 0.224, 0.225]).view(-1, 1, 1)
    batch = batch.div_(255.0)
    return (batch - mean) / std


def smooth_images(n, size, seed):
    """Random smooth RGB images with values in [0, 255], as ToTensor() then Lambda(lambda x: x.mul(255)) give."""
    rng = np.random.RandomState(seed)
    ys, xs = np.meshgrid(np.linspace(0, 1, size), np.linspace(0, 1, size), indexing='ij')
    images = np.zeros((n, 3, size, size))
    for _ in range(3):
        freq = rng.uniform(0, 12, size=(n, 3, 2, 1, 1))
        phase = rng.uniform(0, 2 * np.pi, size=(n, 3, 1, 1))
        images += np.sin(freq[:, :, 0] * ys + freq[:, :, 1] * xs + phase)
    return torch.from_numpy((127.5 + 42.5 * images).astype(np.float32))


def train(args):
    device = torch.device("cpu")
    np.random.seed(args.seed)
    torch.manual_seed(args.seed)

    train_dataset = TensorDataset(smooth_images(args.batches * args.batch_size, args.image_size, 1),
                                  torch.zeros(args.batches * args.batch_size))
    train_loader = DataLoader(train_dataset, batch_size=args.batch_size)

    transformer = TransformerNet().to(device)
    optimizer = Adam(transformer.parameters(), args.lr)
    mse_loss = torch.nn.MSELoss()

    vgg = Vgg16(requires_grad=False).to(device)
    style = smooth_images(1, args.image_size, 2)[0]
    style = style.repeat(args.batch_size, 1, 1, 1).to(device)

    features_style = vgg(normalize_batch(style))
    gram_style = [gram_matrix(y) for y in features_style]

    for e in range(args.epochs):
        transformer.train()
        agg_content_loss = 0.
        agg_style_loss = 0.
        count = 0
        for batch_id, (x, _) in enumerate(train_loader):
            n_batch = len(x)
            count += n_batch
            optimizer.zero_grad()

            x = x.to(device)
            y = transformer(x)

            y = normalize_batch(y)
            x = normalize_batch(x)

            features_y = vgg(y)
            features_x = vgg(x)

            content_loss = args.content_weight * mse_loss(features_y.relu2_2, features_x.relu2_2)

            style_loss = 0.
            for ft_y, gm_s in zip(features_y, gram_style):
                gm_y = gram_matrix(ft_y)
                style_loss += mse_loss(gm_y, gm_s[:n_batch, :, :])
            style_loss *= args.style_weight

            total_loss = content_loss + style_loss
            total_loss.backward()
            optimizer.step()

            agg_content_loss += content_loss.item()
            agg_style_loss += style_loss.item()

            if (batch_id + 1) % args.log_interval == 0:
                mesg = "{}\tEpoch {}:\t[{}/{}]\tcontent: {:.6f}\tstyle: {:.6f}\ttotal: {:.6f}".format(
                    time.ctime(), e + 1, count, len(train_dataset),
                    agg_content_loss / (batch_id + 1),
                    agg_style_loss / (batch_id + 1),
                    (agg_content_loss + agg_style_loss) / (batch_id + 1)
                )
                print(mesg)

    # save model
    transformer.eval().cpu()
    save_model_filename = "epoch_" + str(args.epochs) + "_" + str(
        args.content_weight) + "_" + str(args.style_weight) + ".model"
    save_model_path = os.path.join(args.save_model_dir, save_model_filename)
    torch.save(transformer.state_dict(), save_model_path)

    print("\nDone, trained model saved at", save_model_path)
    return save_model_path


def stylize(model_path, content_image):
    with torch.no_grad():
        style_model = TransformerNet()
        state_dict = torch.load(model_path)
        style_model.load_state_dict(state_dict)
        style_model.eval()
        output = style_model(content_image.unsqueeze(0)).cpu()
    img = output[0].clone().clamp(0, 255).numpy()
    img = img.transpose(1, 2, 0).astype("uint8")
    print("stylized image:", img.shape, img.dtype)


def main():
    parser = argparse.ArgumentParser(description="parser for fast-neural-style")
    parser.add_argument("--epochs", type=int, default=2, help="number of training epochs, default is 2")
    parser.add_argument("--batches", type=int, default=4, help="batches of images in one epoch")
    parser.add_argument("--batch-size", type=int, default=4, help="batch size for training, default is 4")
    parser.add_argument("--save-model-dir", type=str, default=".", help="where the trained model is saved")
    parser.add_argument("--image-size", type=int, default=32, help="size of training images, default is 32 X 32")
    parser.add_argument("--seed", type=int, default=42, help="random seed for training")
    parser.add_argument("--content-weight", type=float, default=1e5, help="weight for content-loss, default is 1e5")
    parser.add_argument("--style-weight", type=float, default=1e10, help="weight for style-loss, default is 1e10")
    parser.add_argument("--lr", type=float, default=1e-3, help="learning rate, default is 1e-3")
    parser.add_argument("--log-interval", type=int, default=2, help="batches between logged training losses")
    args = parser.parse_args()
    model_path = train(args)
    stylize(model_path, smooth_images(1, args.image_size, 3)[0])


if __name__ == "__main__":
    main()
