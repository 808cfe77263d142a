// SPDX-License-Identifier: GPL-2.0-only OR MIT

//! Typed, by-name access to the registers of a [`RegImage`].
//!
//! Each block has a view (`image.common()`, `image.tile_src()`, ...) whose
//! methods return the typed values of [`regs`](super::regs). A register that
//! has not been written reads as 0; use [`RegImage::get`] to tell the two
//! apart.

use super::decode::RegImage;
use super::regs::{
    common, kdma, l2, ne, pe, tile_dst, tile_src, AccBias, ChCfg, Channels, CoeffDmaConfig,
    CommonCfg, ConvCfg, Dim, DmaAddr, Dpe, GroupConvCfg, KernelCfg, L2Addr, L2Cfg, L2ResultCfg,
    L2SourceCfg, MacCfg, MatrixVectorBias, PeBiasScale, PeCfg, PePreScale, PixelOffset, PostScale,
    Reg, TaskInfo, TileCfg, TileDstDmaConfig, TileFmt, TileSrcDmaConfig,
};

/// The addressing of one tile DMA surface (a 5-D tensor in memory).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Surface {
    /// Byte offset of element 0 from the BAR slot's base.
    pub base: DmaAddr,
    /// Bytes between rows.
    pub row_stride: DmaAddr,
    /// Bytes between channel planes.
    pub plane_stride: DmaAddr,
    /// Bytes between depth slices.
    pub depth_stride: DmaAddr,
    /// Bytes between groups.
    pub group_stride: DmaAddr,
}

impl Surface {
    fn read(image: &RegImage, regs: [Reg; 5]) -> Surface {
        let [b, r, p, d, g] = regs.map(|reg| DmaAddr(image.value(reg)));
        Surface {
            base: b,
            row_stride: r,
            plane_stride: p,
            depth_stride: d,
            group_stride: g,
        }
    }
}

impl RegImage {
    /// The kernel DMA source block.
    pub fn kernel_dma(&self) -> KernelDmaView<'_> {
        KernelDmaView(self)
    }
    /// The Common block.
    pub fn common(&self) -> CommonView<'_> {
        CommonView(self)
    }
    /// The tile DMA source block.
    pub fn tile_src(&self) -> TileSrcView<'_> {
        TileSrcView(self)
    }
    /// The L2 block.
    pub fn l2(&self) -> L2View<'_> {
        L2View(self)
    }
    /// The planar engine block.
    pub fn pe(&self) -> PeView<'_> {
        PeView(self)
    }
    /// The neural engine block.
    pub fn ne(&self) -> NeView<'_> {
        NeView(self)
    }
    /// The tile DMA destination block.
    pub fn tile_dst(&self) -> TileDstView<'_> {
        TileDstView(self)
    }
}

/// Kernel DMA source registers of an image.
#[derive(Clone, Copy, Debug)]
pub struct KernelDmaView<'a>(&'a RegImage);

impl KernelDmaView<'_> {
    /// CoeffDMAConfig of channel `i` (0..16).
    pub fn coeff_dma_config(&self, i: u32) -> CoeffDmaConfig {
        CoeffDmaConfig(self.0.value(kdma::COEFF_DMA_CONFIG.at(i)))
    }
    /// CoeffBaseAddr of channel `i`: byte offset from the kernel slot.
    pub fn coeff_base_addr(&self, i: u32) -> DmaAddr {
        DmaAddr(self.0.value(kdma::COEFF_BASE_ADDR.at(i)))
    }
    /// CoeffBfrSize of channel `i`: bytes loaded.
    pub fn coeff_bfr_size(&self, i: u32) -> DmaAddr {
        DmaAddr(self.0.value(kdma::COEFF_BFR_SIZE.at(i)))
    }
    /// Bit mask of the enabled coefficient channels (bit i = channel i).
    pub fn enabled_channels(&self) -> u32 {
        (0..kdma::COEFF_CHANNELS)
            .filter(|&i| self.coeff_dma_config(i).en() != 0)
            .fold(0, |m, i| m | 1u32.checked_shl(i).unwrap_or(0))
    }
}

/// Common registers of an image.
#[derive(Clone, Copy, Debug)]
pub struct CommonView<'a>(&'a RegImage);

impl CommonView<'_> {
    /// InDim.
    pub fn in_dim(&self) -> Dim {
        Dim(self.0.value(common::IN_DIM))
    }
    /// Input depth.
    pub fn in_depth(&self) -> u32 {
        self.0.value(common::IN_DEPTH)
    }
    /// ChCfg.
    pub fn ch_cfg(&self) -> ChCfg {
        ChCfg(self.0.value(common::CH_CFG))
    }
    /// Cin.
    pub fn cin(&self) -> u32 {
        Channels(self.0.value(common::CIN)).count()
    }
    /// Cout.
    pub fn cout(&self) -> u32 {
        Channels(self.0.value(common::COUT)).count()
    }
    /// OutDim.
    pub fn out_dim(&self) -> Dim {
        Dim(self.0.value(common::OUT_DIM))
    }
    /// Output depth.
    pub fn out_depth(&self) -> u32 {
        self.0.value(common::OUT_DEPTH)
    }
    /// ConvCfg.
    pub fn conv_cfg(&self) -> ConvCfg {
        ConvCfg(self.0.value(common::CONV_CFG))
    }
    /// GroupConvCfg.
    pub fn group_conv_cfg(&self) -> GroupConvCfg {
        GroupConvCfg(self.0.value(common::GROUP_CONV_CFG))
    }
    /// TileCfg.
    pub fn tile_cfg(&self) -> TileCfg {
        TileCfg(self.0.value(common::TILE_CFG))
    }
    /// Cfg.
    pub fn cfg(&self) -> CommonCfg {
        CommonCfg(self.0.value(common::CFG))
    }
    /// TaskInfo.
    pub fn task_info(&self) -> TaskInfo {
        TaskInfo(self.0.value(common::TASK_INFO))
    }
    /// DPE.
    pub fn dpe(&self) -> Dpe {
        Dpe(self.0.value(common::DPE))
    }
}

/// Tile DMA source registers of an image.
#[derive(Clone, Copy, Debug)]
pub struct TileSrcView<'a>(&'a RegImage);

impl TileSrcView<'_> {
    /// DMAConfig.
    pub fn dma_config(&self) -> TileSrcDmaConfig {
        TileSrcDmaConfig(self.0.value(tile_src::DMA_CONFIG))
    }
    /// Addressing of source `i` (0 or 1; anything else reads source 1).
    pub fn surface(&self, i: u32) -> Surface {
        Surface::read(self.0, tile_src::surface(i))
    }
    /// Fmt of source `i` (0 or 1; anything else reads source 1).
    pub fn fmt(&self, i: u32) -> TileFmt {
        TileFmt(self.0.value(tile_src::fmt(i)))
    }
    /// PixelOffset\[i\] (0..4).
    pub fn pixel_offset(&self, i: u32) -> PixelOffset {
        PixelOffset(self.0.value(tile_src::PIXEL_OFFSET.at(i)))
    }
}

/// L2 registers of an image.
#[derive(Clone, Copy, Debug)]
pub struct L2View<'a>(&'a RegImage);

impl L2View<'_> {
    /// L2Cfg.
    pub fn l2_cfg(&self) -> L2Cfg {
        L2Cfg(self.0.value(l2::L2_CFG))
    }
    /// SourceCfg.
    pub fn source_cfg(&self) -> L2SourceCfg {
        L2SourceCfg(self.0.value(l2::SOURCE_CFG))
    }
    /// SourceBase.
    pub fn source_base(&self) -> L2Addr {
        L2Addr(self.0.value(l2::SOURCE_BASE))
    }
    /// SourceChannelStride.
    pub fn source_channel_stride(&self) -> L2Addr {
        L2Addr(self.0.value(l2::SOURCE_CHANNEL_STRIDE))
    }
    /// SourceRowStride.
    pub fn source_row_stride(&self) -> L2Addr {
        L2Addr(self.0.value(l2::SOURCE_ROW_STRIDE))
    }
    /// The second source's L2 base (inferred).
    pub fn src1_base(&self) -> L2Addr {
        L2Addr(self.0.value(l2::SRC1_BASE))
    }
    /// ResultCfg.
    pub fn result_cfg(&self) -> L2ResultCfg {
        L2ResultCfg(self.0.value(l2::RESULT_CFG))
    }
    /// ResultBase.
    pub fn result_base(&self) -> L2Addr {
        L2Addr(self.0.value(l2::RESULT_BASE))
    }
    /// ConvResultChannelStride.
    pub fn conv_result_channel_stride(&self) -> L2Addr {
        L2Addr(self.0.value(l2::CONV_RESULT_CHANNEL_STRIDE))
    }
    /// ConvResultRowStride.
    pub fn conv_result_row_stride(&self) -> L2Addr {
        L2Addr(self.0.value(l2::CONV_RESULT_ROW_STRIDE))
    }
}

/// Planar engine registers of an image.
#[derive(Clone, Copy, Debug)]
pub struct PeView<'a>(&'a RegImage);

impl PeView<'_> {
    /// Cfg.
    pub fn cfg(&self) -> PeCfg {
        PeCfg(self.0.value(pe::CFG))
    }
    /// BiasScale.
    pub fn bias_scale(&self) -> PeBiasScale {
        PeBiasScale(self.0.value(pe::BIAS_SCALE))
    }
    /// PreScale.
    pub fn pre_scale(&self) -> PePreScale {
        PePreScale(self.0.value(pe::PRE_SCALE))
    }
    /// FinalScale as IEEE single bits.
    pub fn final_scale_bits(&self) -> u32 {
        self.0.value(pe::FINAL_SCALE)
    }
}

/// Neural engine registers of an image.
#[derive(Clone, Copy, Debug)]
pub struct NeView<'a>(&'a RegImage);

impl NeView<'_> {
    /// KernelCfg.
    pub fn kernel_cfg(&self) -> KernelCfg {
        KernelCfg(self.0.value(ne::KERNEL_CFG))
    }
    /// MACCfg.
    pub fn mac_cfg(&self) -> MacCfg {
        MacCfg(self.0.value(ne::MAC_CFG))
    }
    /// MatrixVectorBias.
    pub fn matrix_vector_bias(&self) -> MatrixVectorBias {
        MatrixVectorBias(self.0.value(ne::MATRIX_VECTOR_BIAS))
    }
    /// AccBias.
    pub fn acc_bias(&self) -> AccBias {
        AccBias(self.0.value(ne::ACC_BIAS))
    }
    /// PostScale.
    pub fn post_scale(&self) -> PostScale {
        PostScale(self.0.value(ne::POST_SCALE))
    }
}

/// Tile DMA destination registers of an image.
#[derive(Clone, Copy, Debug)]
pub struct TileDstView<'a>(&'a RegImage);

impl TileDstView<'_> {
    /// DMAConfig.
    pub fn dma_config(&self) -> TileDstDmaConfig {
        TileDstDmaConfig(self.0.value(tile_dst::DMA_CONFIG))
    }
    /// Addressing of the destination.
    pub fn surface(&self) -> Surface {
        Surface::read(self.0, tile_dst::SURFACE)
    }
    /// Fmt.
    pub fn fmt(&self) -> TileFmt {
        TileFmt(self.0.value(tile_dst::FMT))
    }
}
